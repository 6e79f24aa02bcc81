package actorkit

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Fault points are where tests inject panics into a running component (its event handler, a
// reconcile) to prove that supervision restarts just that component. A component names each
// point it offers with Fault; a test arms one with InjectPanic. Unarmed, a point costs one
// atomic load.
var faults struct {
	armed atomic.Int32 // points armed; 0 skips the lookup
	mu    sync.Mutex
	left  map[string]int
}

// Fault panics if a test armed point (and disarms it after the requested count).
func Fault(point string) {
	if faults.armed.Load() == 0 {
		return
	}
	faults.mu.Lock()
	n, ok := faults.left[point]
	if ok {
		if n <= 1 {
			delete(faults.left, point)
			faults.armed.Add(-1)
		} else {
			faults.left[point] = n - 1
		}
	}
	faults.mu.Unlock()
	if ok {
		panic(fmt.Sprintf("fault injected at %s", point))
	}
}

// InjectPanic arms point: its next times calls panic. Tests only.
func InjectPanic(point string, times int) {
	faults.mu.Lock()
	defer faults.mu.Unlock()
	if faults.left == nil {
		faults.left = map[string]int{}
	}
	if _, ok := faults.left[point]; !ok {
		faults.armed.Add(1)
	}
	faults.left[point] = times
}

// Armed reports how many panics point still has to fire.
func Armed(point string) int {
	faults.mu.Lock()
	defer faults.mu.Unlock()
	return faults.left[point]
}
