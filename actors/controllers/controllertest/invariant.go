package controllertest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Invariant checks a condition on the whole set of objects of one kind after every single
// change in the state log, in log order, so a transient violation cannot slip between polls.
type Invariant struct {
	mu         sync.Mutex
	violations []string
	changes    int
	checking   bool
	check      func(objs []runtime.Object) error
}

// WatchInvariant starts watching group/resource; check runs only between Start and Stop.
func WatchInvariant(t testing.TB, cp *controlplane.ControlPlane, group, resource string, check func(objs []runtime.Object) error) *Invariant {
	t.Helper()
	iv := &Invariant{check: check}
	inf := informer.For(cp.Log, group, resource)
	eval := func() {
		iv.mu.Lock()
		defer iv.mu.Unlock()
		if !iv.checking {
			return
		}
		iv.changes++
		if err := iv.check(inf.List(nil)); err != nil {
			iv.violations = append(iv.violations, fmt.Sprintf("after change %d (rev %d): %v", iv.changes, inf.Rev(), err))
		}
	}
	inf.AddHandler(informer.Funcs{Add: func(runtime.Object) { eval() }, Update: func(_, _ runtime.Object) { eval() }, Delete: func(runtime.Object) { eval() }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = inf.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if !inf.WaitForSync(Ctx(t)) {
		t.Fatal("invariant informer did not sync")
	}
	return iv
}

// Start turns checking on.
func (iv *Invariant) Start() {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	iv.checking = true
}

// Stop turns checking off and returns the violations seen and the number of changes checked.
func (iv *Invariant) Stop() ([]string, int) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	iv.checking = false
	return append([]string(nil), iv.violations...), iv.changes
}
