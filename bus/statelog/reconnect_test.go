package statelog

import (
	"fmt"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/skiff-sh/skiff/bus/natsserver"
)

// The server restarts under an open Log: the client reconnects, the ordered
// consumer is recreated from the next sequence, and a watcher sees every
// event exactly once, in order.
func TestServerRestartUnderOpenLog(t *testing.T) {
	dir := t.TempDir()
	srv, err := natsserver.Start(natsserver.Config{DataDir: dir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.ClientURL())
	port, _ := strconv.Atoi(u.Port())
	nc, err := srv.Connect(nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := ctx(t)
	l, err := Open(c, nc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w := must[*Watcher](t)(l.Watch(c, "r/", WatchOptions{}))
	defer w.Stop()
	var revs []uint64
	for i := range 5 {
		revs = append(revs, must[uint64](t)(l.Create(c, fmt.Sprintf("r/%d", i), nil, nil)))
	}
	srv.Shutdown()
	srv, err = natsserver.Start(natsserver.Config{DataDir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	for i := 5; i < 10; i++ {
		var rev uint64
		// Writes fail until the client has reconnected and JetStream is back.
		deadline := time.Now().Add(15 * time.Second)
		for {
			rev, err = l.Create(c, fmt.Sprintf("r/%d", i), nil, nil)
			if err == nil || time.Now().After(deadline) {
				break
			}
			if err := nc.FlushTimeout(time.Second); err != nil {
				continue
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, rev)
	}
	for i, want := range revs {
		ev := nextNonBookmark(t, w)
		if ev.Rev != want || ev.Key != fmt.Sprintf("r/%d", i) {
			t.Fatalf("event %d: %+v, want rev %d", i, ev, want)
		}
	}
	if l.Rev() != revs[len(revs)-1] {
		t.Fatalf("view at %d, want %d", l.Rev(), revs[len(revs)-1])
	}
}
