package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// hintMoves counts the pods that cluster events sent back from the unschedulable pool.
func hintMoves(t *testing.T) float64 {
	return testutil.Metric(t, "skiff_scheduler_queue_incoming_pods_total", func(l map[string]string) bool {
		return l["queue"] != "unschedulable" && (strings.HasPrefix(l["event"], "Node") || strings.HasPrefix(l["event"], "AssignedPod"))
	})
}

func nodeEventsHandled(t *testing.T) float64 {
	return testutil.Metric(t, "skiff_scheduler_informer_events_total", func(l map[string]string) bool { return l["resource"] == "nodes" })
}

func waitForNodeEvents(t *testing.T, atLeast float64) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := nodeEventsHandled(t); n < atLeast {
			return fmt.Errorf("the scheduler handled %v node events, want %v", n, atLeast)
		}
		return nil
	})
}

// heartbeat posts a node status that differs only in the conditions' heartbeat time, at when
// (the API stores seconds; a write that changes nothing is no write).
func heartbeat(t *testing.T, cp *controlplane.ControlPlane, name string, when time.Time) {
	t.Helper()
	kind, _ := schemas.ByResource("", "v1", "nodes")
	o, err := cp.Client.Get(context.Background(), kind, "", name)
	if err != nil {
		t.Fatal(err)
	}
	n := o.(*corev1.Node).DeepCopy()
	for i := range n.Status.Conditions {
		n.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(when)
	}
	if _, err := cp.Client.UpdateStatus(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

// A pod too big for every node waits in the unschedulable pool: heartbeats of the small nodes
// move nothing; a node big enough moves it (once), and it is bound there.
func TestAnUnschedulablePodWaitsForANodeItFitsNotForHeartbeats(t *testing.T) {
	cp, _ := startWithScheduler(t)
	ctx := context.Background()
	handled := nodeEventsHandled(t)
	addNode(t, cp, node("s1", "1"))
	addNode(t, cp, node("s2", "1"))
	waitForNodeEvents(t, handled+4) // both nodes and their status are in the scheduler's cache
	if _, err := cp.Client.Create(ctx, pod("big", "2")); err != nil {
		t.Fatal(err)
	}
	waitUnschedulable(t, cp, "big", "0/2 nodes are available: 2 Insufficient cpu.")

	moves, handled := hintMoves(t), nodeEventsHandled(t)
	const beats = 5
	for i := range beats {
		when := time.Now().Add(time.Duration(i+1) * time.Second)
		heartbeat(t, cp, "s1", when)
		heartbeat(t, cp, "s2", when)
	}
	waitForNodeEvents(t, handled+2*beats)
	if got := hintMoves(t) - moves; got != 0 {
		t.Fatalf("heartbeats moved %v pods out of the unschedulable pool", got)
	}
	if n := testutil.Metric(t, "skiff_scheduler_pending_pods", func(l map[string]string) bool { return l["queue"] == "unschedulable" }); n != 1 {
		t.Fatalf("%v pods in the unschedulable pool, want 1", n)
	}

	addNode(t, cp, node("large", "4"))
	waitBoundTo(t, cp, "big", "large")
	if got := hintMoves(t) - moves; got != 1 {
		t.Fatalf("%v hint-driven moves for the large node, want 1", got)
	}
}
