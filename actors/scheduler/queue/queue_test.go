package queue

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/actors/scheduler/framework"
)

func newQueue(t *testing.T) (*Queue, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Now())
	q := New(Options{Clock: clk})
	t.Cleanup(q.ShutDown)
	return q, clk
}

func pod(name, cpu string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}}}}
}

func nodeAdded(name, cpu string) *framework.ClusterEvent {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse(cpu), v1.ResourcePods: resource.MustParse("110")}}}
	return &framework.ClusterEvent{Resource: framework.ResourceNode, Action: framework.Add, Node: n}
}

func podDeleted(p *v1.Pod) *framework.ClusterEvent {
	return &framework.ClusterEvent{Resource: framework.ResourceAssignedPod, Action: framework.Delete, Pod: p}
}

// next is the pod the queue hands out next; the test fails if none comes. The queue's
// delaying loop may arm its timer after the test stepped the fake clock past it (timers due
// at creation fire on the next step only), so the clock is nudged while waiting.
func next(t *testing.T, q *Queue, clk *clocktesting.FakeClock) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		k, _ := q.Get()
		got <- k
	}()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case k := <-got:
			return k
		case <-deadline:
			t.Fatal("no pod came out of the queue")
			return ""
		case <-time.After(10 * time.Millisecond):
			clk.Step(0)
		}
	}
}

// failAttempt runs one cycle of key that ends with no node fitting.
func failAttempt(t *testing.T, q *Queue, clk *clocktesting.FakeClock, key string, p *v1.Pod, rejected framework.PluginSet) {
	t.Helper()
	if got := next(t, q, clk); got != key {
		t.Fatalf("queue handed out %q, want %q", got, key)
	}
	q.Unschedulable(key, p, rejected)
}

var (
	byResources = framework.PluginSetOf(framework.NodeResourcesFit)
	byTaint     = framework.PluginSetOf(framework.TaintToleration)
)

// An unschedulable pod waits until an event its rejecting plugin's hint accepts: not a node
// too small, not an event only other plugins care about; then it waits out its backoff.
func TestHintsMoveOnlyPodsThatMayFit(t *testing.T) {
	q, clk := newQueue(t)
	big, tainted := pod("big", "2"), pod("tainted", "1")
	q.Add("default/big")
	q.Add("default/tainted")
	failAttempt(t, q, clk, "default/big", big, byResources)
	failAttempt(t, q, clk, "default/tainted", tainted, byTaint)
	if n := q.NumUnschedulable(); n != 2 {
		t.Fatalf("%d pods in the pool, want 2", n)
	}
	small := nodeAdded("small", "1")
	small.Node.Spec.Taints = []v1.Taint{{Key: "gpu", Effect: v1.TaintEffectNoSchedule}}
	if moved := q.OnEvent(small); moved != 0 {
		t.Fatalf("a tainted node too small for big moved %d pods", moved)
	}
	// A bound pod that goes frees room (big may fit), but cannot lift a taint.
	if moved := q.OnEvent(podDeleted(pod("other", "1"))); moved != 1 || q.NumUnschedulable() != 1 {
		t.Fatalf("a pod deletion moved %d pods, left %d; want 1 (big), 1 (tainted)", moved, q.NumUnschedulable())
	}
	// Moved at once after failing: its 1 s backoff is still to run.
	if q.Len() != 0 {
		t.Fatal("a pod moved during its backoff is ready at once")
	}
	clk.Step(time.Second)
	if got := next(t, q, clk); got != "default/big" {
		t.Fatalf("got %q after the backoff, want default/big", got)
	}
	q.Unschedulable("default/big", big, byResources)
	// Untainted and big enough: both may fit now.
	if moved := q.OnEvent(nodeAdded("large", "4")); moved != 2 {
		t.Fatalf("a node big enough moved %d pods, want 2", moved)
	}
}

// An event that arrives while a pod is in its cycle was not in its snapshot: a failure of
// that cycle is judged against it instead of parking the pod until the next one.
func TestEventDuringTheCycleIsNotLost(t *testing.T) {
	q, clk := newQueue(t)
	big := pod("big", "2")
	q.Add("default/big")
	if got := next(t, q, clk); got != "default/big" {
		t.Fatal(got)
	}
	q.OnEvent(nodeAdded("small", "1")) // no help
	q.OnEvent(nodeAdded("large", "4")) // would have helped
	q.Unschedulable("default/big", big, byResources)
	if n := q.NumUnschedulable(); n != 0 {
		t.Fatalf("%d pods in the pool: the node that came during the cycle was missed", n)
	}
	clk.Step(time.Second)
	if got := next(t, q, clk); got != "default/big" {
		t.Fatal(got)
	}
	// With no cycle running, events are not kept.
	q.Unschedulable("default/big", big, byResources)
	if len(q.events) != 0 || len(q.inFlight) != 0 {
		t.Fatalf("%d events, %d cycles kept after every cycle ended", len(q.events), len(q.inFlight))
	}
}

// No event helps: the pod still leaves the pool after MaxInUnschedulable.
func TestUnschedulablePodsLeaveThePoolAfterTheTimeout(t *testing.T) {
	q, clk := newQueue(t)
	q.Add("default/big")
	failAttempt(t, q, clk, "default/big", pod("big", "2"), byResources)
	clk.Step(DefaultMaxInUnschedulable - time.Second)
	q.FlushLeftover()
	if q.NumUnschedulable() != 1 {
		t.Fatal("left the pool before the timeout")
	}
	clk.Step(time.Second)
	q.FlushLeftover()
	if q.NumUnschedulable() != 0 || next(t, q, clk) != "default/big" {
		t.Fatal("still waiting after the timeout")
	}
}

// A pending pod that changes is tried again (after its backoff), whether it waits in the pool
// or is in a cycle when the change comes.
func TestAChangedPodLeavesThePool(t *testing.T) {
	q, clk := newQueue(t)
	big := pod("big", "2")
	q.Add("default/big")
	failAttempt(t, q, clk, "default/big", big, byTaint)
	q.Updated("default/big")
	if q.NumUnschedulable() != 0 {
		t.Fatal("the changed pod stayed in the pool")
	}
	clk.Step(time.Second)
	if got := next(t, q, clk); got != "default/big" {
		t.Fatal(got)
	}
	q.Updated("default/big") // during its cycle
	q.Unschedulable("default/big", big, byTaint)
	if q.NumUnschedulable() != 0 {
		t.Fatal("a pod changed during its cycle went to the pool")
	}
}

// Backoff doubles from 1 s to at most 10 s per failed attempt, and a bind resets it.
func TestBackoffDoublesToTenSeconds(t *testing.T) {
	q, clk := newQueue(t)
	big := pod("big", "2")
	q.Add("default/big")
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second} {
		failAttempt(t, q, clk, "default/big", big, byResources)
		if got := q.pool["default/big"].backoffUntil.Sub(clk.Now()); got != want {
			t.Fatalf("backoff %v, want %v", got, want)
		}
		clk.Step(want) // served: the hint's move makes the pod ready at once
		q.OnEvent(nodeAdded("large", "4"))
		if q.Len() != 1 {
			t.Fatalf("not ready after its %v backoff", want)
		}
	}
	if got := next(t, q, clk); got != "default/big" {
		t.Fatal(got)
	}
	q.Finished("default/big")
	q.Add("default/big")
	failAttempt(t, q, clk, "default/big", big, byResources)
	if got := q.pool["default/big"].backoffUntil.Sub(clk.Now()); got != time.Second {
		t.Fatalf("after a success the backoff is %v, want 1s again", got)
	}
}
