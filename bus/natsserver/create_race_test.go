package natsserver_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skiff-sh/skiff/bus/statelog"
)

// Two apiserver replicas starting together on an R3 cluster, each on its own NATS server,
// create the same keys at once: every key has exactly one success and one ErrExists, never
// ErrConflict. Each round is a new stream, whose followers are still catching up as at a
// cluster's first start, and may answer a direct get without the winner's write.
func TestConcurrentCreatesOnR3OneWinsOneExists(t *testing.T) {
	c := startCluster(t)
	var err error
	conns := make([]*nats.Conn, 2)
	for i := range conns {
		if conns[i], err = nats.Connect(c.Servers[i].ClientURL()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conns[i].Close)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	keys := []string{"core/namespaces/default", "core/namespaces/kube-system", "core/namespaces/kube-public", "core/namespaces/kube-node-lease"}
	for round := range 10 {
		cfg := statelog.Config{Replicas: 3, Stream: fmt.Sprint("RACE", round), Prefix: fmt.Sprint("race", round)}
		logs := make([]*statelog.Log, len(conns))
		for i, nc := range conns {
			if logs[i], err = statelog.Open(ctx, nc, cfg); err != nil {
				t.Fatal(err)
			}
			defer logs[i].Close()
		}
		errs := make([][]error, len(logs))
		var wg sync.WaitGroup
		for i, l := range logs {
			wg.Go(func() {
				for _, k := range keys {
					_, err := l.Create(ctx, k, []byte("x"), nil)
					errs[i] = append(errs[i], err)
				}
			})
		}
		wg.Wait()
		for i, k := range keys {
			created := 0
			for r := range errs {
				switch err := errs[r][i]; {
				case err == nil:
					created++
				case !errors.Is(err, statelog.ErrExists):
					t.Fatalf("round %d: replica %d: create %s: %v", round, r, k, err)
				}
			}
			if created != 1 {
				t.Fatalf("round %d: %s: %d creates succeeded, want 1 (%v)", round, k, created, errs)
			}
		}
	}
}
