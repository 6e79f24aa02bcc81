package natsserver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// A reader limited to its consumer names (a node's view) keeps following the log when the
// server holding its consumer dies: it recreates the consumer under one of its names on a
// live server.
func TestNamedReaderSurvivesItsConsumersServer(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	_, writer := openR3(t, c)
	rnc, err := c.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer rnc.Close()
	names := []string{"node_a_view0", "node_a_view1"}
	reader, err := statelog.Open(ctx, rnc, statelog.Config{ReadOnly: true, ConsumerNames: names})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	st, err := jetstreamStream(ctx, rnc)
	if err != nil {
		t.Fatal(err)
	}
	var host string
	for _, n := range names {
		if cons, err := st.Consumer(ctx, n); err == nil && cons.CachedInfo().Cluster != nil {
			host = cons.CachedInfo().Cluster.Leader
		}
	}
	if host == "" {
		t.Fatal("the reader's consumer has no host")
	}
	killed := time.Now()
	c.Stop(c.Index(host))
	var rev uint64
	testutil.Eventually(t, 60*time.Second, 50*time.Millisecond, func() error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		rev, err = writer.Create(cctx, fmt.Sprint("after/", time.Now().UnixNano()), []byte("x"), nil)
		return err
	})
	testutil.Eventually(t, 60*time.Second, 20*time.Millisecond, func() error {
		if r := reader.Rev(); r < rev {
			return fmt.Errorf("reader at %d, the write at %d (consumer: %v)", r, rev, reader.ConsumerErr())
		}
		return nil
	})
	t.Logf("reader's consumer on %s killed; reader has the next write %v later", host, time.Since(killed).Round(time.Millisecond))
}
