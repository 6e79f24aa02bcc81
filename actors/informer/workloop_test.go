package informer_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// loopRecord is what a WorkLoop's incarnations did, in order.
type loopRecord struct {
	mu     sync.Mutex
	q      workqueue.TypedRateLimitingInterface[string] // the current incarnation's
	synced []string                                     // "<incarnation>:<key>"
	events []string                                     // "start <n>", "run <n> returned", "stop <cleanup>"
	n      int
}

func (r *loopRecord) add(list *[]string, s string) {
	r.mu.Lock()
	*list = append(*list, s)
	r.mu.Unlock()
}

func (r *loopRecord) snapshot() (synced, events []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.synced), slices.Clone(r.events)
}

// A WorkLoop actor: informer events become keys its Run drains; a panic in an event handler
// stops the incarnation (its Run returns before Stop(false)) and the next one replays the
// cache into a fresh queue; stopping the actor gives Stop the Cleanup flag, after Run returned.
func TestWorkLoopIncarnations(t *testing.T) {
	l := openLog(t, statelog.Config{})
	inf := informer.New(l, cmKind(), "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.Run(ctx)
	rec := &loopRecord{}
	enqueue := func(o runtime.Object) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.q.Add(o.(*corev1.ConfigMap).Name)
	}
	const fault = "workloop test event"
	sys := actorkit.NewSystem()
	defer sys.Shutdown()
	pid, err := sys.Spawn("loop", func() actorkit.Actor {
		return &informer.WorkLoop{
			Name: "loop sync", Fault: fault, Cleanup: true,
			Handlers: map[*informer.Informer]informer.Handler{inf: informer.Funcs{
				Add: enqueue, Update: func(_, o runtime.Object) { enqueue(o) }, Delete: enqueue}},
			Start: func(in *informer.Incarnation) {
				rec.mu.Lock()
				rec.n++
				rec.q = in.Queue
				rec.events = append(rec.events, fmt.Sprint("start ", rec.n))
				rec.mu.Unlock()
			},
			Run: func(ctx context.Context, in *informer.Incarnation) {
				rec.mu.Lock()
				n := rec.n
				rec.mu.Unlock()
				actorkit.Drain(ctx, in.Queue, func(key string) error {
					rec.add(&rec.synced, fmt.Sprintf("%d:%s", n, key))
					return nil
				}, func(string, error) {})
				rec.add(&rec.events, fmt.Sprintf("run %d returned", n))
			},
			Stop: func(cleanup bool) { rec.add(&rec.events, fmt.Sprint("stop ", cleanup)) },
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	wantSynced := func(keys ...string) {
		t.Helper()
		testutil.Eventually(t, 20*time.Second, 10*time.Millisecond, func() error {
			synced, _ := rec.snapshot()
			for _, k := range keys {
				if !slices.Contains(synced, k) {
					return fmt.Errorf("synced %v, want %s among them", synced, k)
				}
			}
			return nil
		})
	}
	putCM(t, l, "a", "1")
	wantSynced("1:a")

	actorkit.InjectPanic(fault, 1)
	putCM(t, l, "b", "1")
	wantSynced("2:a", "2:b") // the new incarnation's subscription replays the cache
	if synced, _ := rec.snapshot(); slices.Contains(synced, "1:b") {
		t.Fatalf("the failed incarnation synced b after its handler panicked: %v", synced)
	}

	sys.Stop(pid)
	_, events := rec.snapshot()
	want := []string{"start 1", "run 1 returned", "stop false", "start 2", "run 2 returned", "stop true"}
	if !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
}
