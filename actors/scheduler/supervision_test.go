package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/scheduler"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/logvalue"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// bindings follows the pods in the state log: a write that sets spec.nodeName on a pod that
// had none is a binding; one that changes or clears it afterwards is a violation.
type bindings struct {
	mu         sync.Mutex
	node       map[string]string
	count      map[string]int
	violations []string
}

func watchBindings(t *testing.T, cp *controlplane.ControlPlane) *bindings {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := cp.Log.Watch(ctx, schemas.StoragePrefix(podsKind(), "default"), statelog.WatchOptions{FromRev: cp.Log.Rev()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	b := &bindings{node: map[string]string{}, count: map[string]int{}}
	go func() {
		for ev := range w.Events() {
			if ev.Type != statelog.EventPut {
				continue
			}
			if node, err := logvalue.PodNodeName(ev.Value); err == nil {
				b.observe(ev.Key[strings.LastIndexByte(ev.Key, '/')+1:], node)
			}
		}
	}()
	return b
}

func (b *bindings) observe(pod, node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	was := b.node[pod]
	switch {
	case was == "" && node != "":
		b.node[pod] = node
		b.count[pod]++
	case was != "" && node != was:
		b.violations = append(b.violations, fmt.Sprintf("%s: spec.nodeName %q -> %q", pod, was, node))
	}
}

// check returns an error until want pods are bound, and a violation or a second binding as
// soon as one is seen.
func (b *bindings) check(want int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.violations) > 0 {
		return fmt.Errorf("bound pods rebound: %v", b.violations)
	}
	for p, n := range b.count {
		if n > 1 {
			return fmt.Errorf("%s bound %d times", p, n)
		}
	}
	if len(b.count) != want {
		return fmt.Errorf("%d of %d pods bound", len(b.count), want)
	}
	return nil
}

// A panic in the scheduler's event handler, twice while pods stream in, restarts the
// scheduler (not the process); every pod, including those created after the panics, ends
// bound exactly once, and a bound pod never moves.
func TestPanicInTheEventHandlerRestartsTheSchedulerAndEveryPodIsBoundOnce(t *testing.T) {
	cp, binds := startWithScheduler(t)
	b := watchBindings(t, cp)
	for i := range 3 {
		addNode(t, cp, node(fmt.Sprintf("n%d", i), "64"))
	}
	create := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := cp.Client.Create(context.Background(), pod(fmt.Sprintf("w%d", i), "10m")); err != nil {
				t.Fatal(err)
			}
		}
	}
	const total = 250 // and 50 more after: 300 of the 330 pod slots
	restarted := func(n int) func() error {
		return func() error {
			if left := actorkit.Armed(scheduler.FaultEvent); left > 0 {
				return fmt.Errorf("the fault has not fired yet")
			}
			if got := cp.Actors.Health().Restarts(testScheduler); got != n {
				return fmt.Errorf("%d restarts, want %d", got, n)
			}
			return nil
		}
	}
	create(0, total/3)
	actorkit.InjectPanic(scheduler.FaultEvent, 1)
	create(total/3, 2*total/3)
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, restarted(1))
	actorkit.InjectPanic(scheduler.FaultEvent, 1)
	create(2*total/3, total)
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, restarted(2))
	create(total, total+50) // after the last restart
	t.Cleanup(func() {
		if t.Failed() {
			logUnbound(t, cp)
		}
	})
	testutil.Eventually(t, 30*time.Second, 20*time.Millisecond, func() error { return b.check(total + 50) })
	if n, _ := boundCount(t, cp); n != total+50 {
		t.Fatalf("%d pods bound in the API, want %d", n, total+50)
	}
	if twice := binds.twice(); len(twice) > 0 || len(binds.seen) != total+50 {
		t.Fatalf("%d pods bound by the scheduler, these twice: %v", len(binds.seen), twice)
	}
	if err := cp.Actors.Health().Check(); err != nil {
		t.Fatal(err)
	}
}

// logUnbound says why the pods still unbound are (their PodScheduled condition).
func logUnbound(t *testing.T, cp *controlplane.ControlPlane) {
	objs, _, err := cp.Client.List(context.Background(), podsKind(), "default", nil)
	if err != nil {
		t.Log(err)
		return
	}
	for _, o := range objs {
		if p := o.(*corev1.Pod); p.Spec.NodeName == "" {
			t.Logf("unbound: %s %v", p.Name, p.Status.Conditions)
		}
	}
}
