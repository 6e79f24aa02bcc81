package natsserver_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// ackCounter records every acknowledged write of a writer and the longest wait between two acks.
type ackCounter struct {
	mu       sync.Mutex
	acked    []string
	failed   int
	last     time.Time
	maxPause time.Duration
	rev      uint64 // highest acknowledged revision
	// The writer's own view should hold each write when Create returns; lagSince is when it
	// stopped doing so, maxLag the longest such stall.
	lagSince time.Time
	maxLag   time.Duration
}

func (a *ackCounter) lastRev() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rev
}

func (a *ackCounter) ack(key string, rev uint64, inView bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rev = max(a.rev, rev)
	switch now := time.Now(); {
	case !inView && a.lagSince.IsZero():
		a.lagSince = now
	case inView && !a.lagSince.IsZero():
		a.maxLag = max(a.maxLag, now.Sub(a.lagSince))
		a.lagSince = time.Time{}
	}
	now := time.Now()
	if !a.last.IsZero() {
		a.maxPause = max(a.maxPause, now.Sub(a.last))
	}
	a.last = now
	a.acked = append(a.acked, key)
}

func (a *ackCounter) fail() {
	a.mu.Lock()
	a.failed++
	a.mu.Unlock()
}

func (a *ackCounter) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.acked)
}

// The state stream at R3 on a 3-server cluster keeps taking writes when a server dies (the
// stream's leader, or the one the writer is connected to), and every write that was
// acknowledged is in the log afterwards.
func TestClusterR3WritesSurviveServerLoss(t *testing.T) {
	t.Run("stream leader", func(t *testing.T) {
		writeThroughLoss(t, func(r roles) (string, bool) { return r.streamLeader, true })
	})
	t.Run("writer's server", func(t *testing.T) {
		writeThroughLoss(t, func(r roles) (string, bool) { return r.connected, true })
	})
	// The view's ordered consumer is an R1 consumer on one server. Losing it without losing the
	// connection (the host is another server) is silent: only missed heartbeats tell.
	t.Run("view's consumer host", func(t *testing.T) {
		writeThroughLoss(t, func(r roles) (string, bool) { return r.consumerHost, r.consumerHost != r.connected })
	})
}

// roles names the servers that play a part for the writer.
type roles struct{ streamLeader, connected, consumerHost string }

func writeThroughLoss(t *testing.T, victimOf func(roles) (string, bool)) {
	c, err := natsserver.StartCluster(3, natsserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	ctx := context.Background()
	nc, log := openR3(t, c)
	st, err := jetstreamStream(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream not at R3: config %d, cluster %+v", info.Config.Replicas, info.Cluster)
	}
	leader := info.Cluster.Leader
	// Where the view's consumer lands is the servers' choice: open views until victimOf accepts.
	var victim, consumerHost, connected string
	seen := map[string]bool{}
	for attempt := 0; ; attempt++ {
		consumerHost = viewConsumerHost(t, st, seen)
		var ok bool
		connected = nc.ConnectedServerName()
		if victim, ok = victimOf(roles{streamLeader: leader, connected: connected, consumerHost: consumerHost}); ok {
			break
		}
		if attempt == 20 {
			t.Fatal("never got the server layout the case needs")
		}
		_ = log.Close()
		if log, err = statelog.Open(ctx, nc, statelog.Config{Replicas: 3}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = log.Close() })
	}

	var acks ackCounter
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; wctx.Err() == nil; i++ {
			// A short deadline per attempt, so the measured pause is the outage, not a client timeout.
			key := fmt.Sprintf("w/%07d", i)
			cctx, cancel := context.WithTimeout(wctx, time.Second)
			rev, err := log.Create(cctx, key, []byte(key), nil)
			cancel()
			if err != nil {
				acks.fail()
				continue
			}
			acks.ack(key, rev, log.Rev() >= rev)
		}
	}()
	testutil.Eventually(t, 20*time.Second, 10*time.Millisecond, func() error {
		if n := acks.count(); n < 300 {
			return fmt.Errorf("%d writes acknowledged", n)
		}
		return nil
	})
	before := acks.count()
	meta := c.MetaLeader()
	killed := time.Now()
	c.Stop(c.Index(victim))
	testutil.Eventually(t, 60*time.Second, 10*time.Millisecond, func() error {
		if n := acks.count() - before; n < 300 {
			return fmt.Errorf("%d writes acknowledged since %s died", n, victim)
		}
		return nil
	})
	stop()
	<-done
	took := time.Since(killed)
	// The writer's own view (its ordered consumer) must follow the stream across the loss.
	last := acks.lastRev()
	caught := time.Now()
	testutil.Eventually(t, 20*time.Second, 10*time.Millisecond, func() error {
		if r := log.Rev(); r < last {
			return fmt.Errorf("the writer's view is at revision %d, the last acknowledged write at %d (consumer: %v)", r, last, log.ConsumerErr())
		}
		return nil
	})
	t.Logf("writer's view caught up %v after the writes stopped", time.Since(caught).Round(time.Millisecond))

	// Read back through a fresh connection and view: every acknowledged key must be there.
	_, check := openR3(t, c)
	entries, _, err := check.List(ctx, "w/", statelog.ReadOptions{Consistent: true})
	if err != nil {
		t.Fatal(err)
	}
	found := make(map[string]bool, len(entries))
	for _, e := range entries {
		found[e.Key] = true
	}
	acks.mu.Lock()
	defer acks.mu.Unlock()
	missing := 0
	for _, k := range acks.acked {
		if !found[k] {
			missing++
		}
	}
	t.Logf("killed %s (stream leader %s, meta leader %s, view's consumer on %s, writer on %s): %d writes acked (%d before the kill), %d found in the log, %d missing, %d failed attempts; longest pause between acks %v, longest view stall %v (run after kill %v)",
		victim, leader, meta, consumerHost, connected, len(acks.acked), before, len(entries), missing, acks.failed, acks.maxPause.Round(time.Millisecond), acks.maxLag.Round(time.Millisecond), took.Round(time.Millisecond))
	if missing > 0 {
		t.Fatalf("%d acknowledged writes lost", missing)
	}
	if acks.maxPause > 15*time.Second {
		t.Fatalf("writes paused for %v", acks.maxPause)
	}
	// A view that lost its consumer makes a new one, which waits for a meta leader when the
	// dead server was that too (NATS elects one in a few seconds).
	if acks.maxLag > 15*time.Second {
		t.Fatalf("the writer's view stalled for %v", acks.maxLag)
	}
}

// startCluster starts three servers, waits for a meta leader and stops them at the test's end.
func startCluster(t *testing.T) *natsserver.Cluster {
	t.Helper()
	c, err := natsserver.StartCluster(3, natsserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	if err := c.WaitForLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	return c
}

// openR3 opens the state log at R3 on its own connection to the cluster.
func openR3(t *testing.T, c *natsserver.Cluster) (*nats.Conn, *statelog.Log) {
	t.Helper()
	nc, err := c.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l, err := statelog.Open(context.Background(), nc, statelog.Config{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return nc, l
}

// viewConsumerHost is the server holding the newest view's ordered consumer on the stream;
// old names views closed before (their consumers go away asynchronously).
func viewConsumerHost(t *testing.T, st jetstream.Stream, old map[string]bool) string {
	t.Helper()
	var host string
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		lister := st.ListConsumers(context.Background())
		var names, hosts []string
		for ci := range lister.Info() {
			if ci.Cluster != nil && !old[ci.Name] {
				names, hosts = append(names, ci.Name), append(hosts, ci.Cluster.Leader)
			}
		}
		if lister.Err() != nil || len(hosts) != 1 {
			return fmt.Errorf("the view's consumer: hosts %v, %v", hosts, lister.Err())
		}
		old[names[0]], host = true, hosts[0]
		return nil
	})
	return host
}

func jetstreamStream(ctx context.Context, nc *nats.Conn) (jetstream.Stream, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return js.Stream(ctx, "STATE")
}
