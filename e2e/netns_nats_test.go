package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/netnscluster"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// Three `skiff nats` servers hold the state at R3. kill -9 the one leading the state stream
// while a writer creates objects one after another: writes go on after a short pause, every
// acknowledged write is found afterwards, and the nodes stay Ready with their pods running.
func TestNetnsNATSServerKilled(t *testing.T) {
	c := startCluster(t, netnscluster.Options{Nodes: 2, NATSServers: 3})
	c.apply(echoDeployment("web", 2, ""))
	c.waitPods("app=web", 2, 90*time.Second, nil)

	w := &writer{c: c}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx) }()
	testutil.Eventually(t, 20*time.Second, 20*time.Millisecond, func() error { return w.atLeast(50) })

	victim := c.streamLeader()
	killedAt := time.Now()
	w.mark(killedAt)
	victim.Kill()
	// Writes continue: a good number of them acknowledged after the kill.
	testutil.Eventually(t, 60*time.Second, 20*time.Millisecond, func() error { return w.afterKill(100) })
	stop()
	<-done

	acked, gap := w.result()
	k, _ := schemas.ByResource("", "v1", "configmaps")
	objs, _, err := c.client().List(context.Background(), k, "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, o := range objs {
		found[o.(*corev1.ConfigMap).Name] = true
	}
	var lost []string
	for _, name := range acked {
		if !found[name] {
			lost = append(lost, name)
		}
	}
	t.Logf("NATS server %s (state stream leader) killed: writes paused %v at most; %d writes acknowledged, %d of them found afterwards (%d lost), %d config maps in all",
		victim.Name, gap.Round(time.Millisecond), len(acked), len(acked)-len(lost), len(lost), len(found))
	if len(lost) > 0 {
		t.Fatalf("%d acknowledged writes lost: %v", len(lost), lost)
	}
	for _, n := range c.Nodes {
		n.WaitReady(true, 30*time.Second)
	}
	c.waitPods("app=web", 2, 30*time.Second, nil)
}

// streamLeader is the NATS server process leading the state stream's Raft group.
func (c *cluster) streamLeader() *netnscluster.Proc {
	c.t.Helper()
	js, err := jetstream.New(c.CP.Conn)
	if err != nil {
		c.t.Fatal(err)
	}
	var leader string
	testutil.Eventually(c.t, 20*time.Second, 50*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, "STATE")
		if err != nil {
			return err
		}
		if info := s.CachedInfo(); info.Cluster == nil || info.Cluster.Leader == "" {
			return fmt.Errorf("state stream has no leader yet")
		} else {
			leader = info.Cluster.Leader
		}
		return nil
	})
	for _, p := range c.NATSProcs {
		if p.Name == leader {
			return p
		}
	}
	c.t.Fatalf("stream leader %q is none of the cluster's servers", leader)
	return nil
}

// writer creates config maps one after another, each retried until it is acknowledged, and
// remembers which were, and the longest wait between two acknowledgements.
type writer struct {
	c      *cluster
	mu     sync.Mutex
	acked  []string
	killed time.Time
	after  int
	gap    time.Duration
}

func (w *writer) run(ctx context.Context) {
	last := time.Now()
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("w-%05d", i)
		for ctx.Err() == nil {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := w.c.client().Create(cctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
			cancel()
			// AlreadyExists: an earlier attempt landed but its answer was lost; acknowledged now.
			if err == nil || apierrors.IsAlreadyExists(err) {
				now := time.Now()
				w.mu.Lock()
				w.acked = append(w.acked, name)
				w.gap = max(w.gap, now.Sub(last))
				if !w.killed.IsZero() && now.After(w.killed) {
					w.after++
				}
				w.mu.Unlock()
				last = now
				break
			}
			select { // a failed write: retry shortly, not in a hot loop
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

func (w *writer) mark(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.killed = t
}

func (w *writer) atLeast(n int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.acked) < n {
		return fmt.Errorf("%d writes acknowledged, waiting for %d", len(w.acked), n)
	}
	return nil
}

func (w *writer) afterKill(n int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.after < n {
		return fmt.Errorf("%d writes acknowledged since the kill, waiting for %d", w.after, n)
	}
	return nil
}

func (w *writer) result() ([]string, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.acked...), w.gap
}
