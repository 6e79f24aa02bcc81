package actorkit

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Health records which actors their supervisors stopped for good. A process with any such
// actor is not ready and not live: it no longer does part of its job and needs a restart.
type Health struct {
	mu       sync.Mutex
	failed   map[string]string // actor path -> last failure
	restarts map[string]int    // actor path -> restarts after a failure
	watches  []func(actor, reason string)
}

func newHealth() *Health { return &Health{failed: map[string]string{}, restarts: map[string]int{}} }

func (h *Health) restarted(path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.restarts[path]++
}

// Restarts is how many times the actor at path was restarted after a failure.
func (h *Health) Restarts(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.restarts[path]
}

// OnStoppedForGood registers f to be told of every actor stopped for good (an Event, a log).
func (h *Health) OnStoppedForGood(f func(actor, reason string)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watches = append(h.watches, f)
}

// started clears an earlier failure under the same path: a respawned actor is healthy again.
func (h *Health) started(path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.failed, path)
	stoppedGauge.DeleteLabelValues(path)
}

func (h *Health) stoppedForGood(path, reason string) {
	h.mu.Lock()
	h.failed[path] = reason
	watches := append([]func(string, string){}, h.watches...)
	h.mu.Unlock()
	for _, f := range watches {
		f(path, reason)
	}
}

// Check returns an error naming every actor stopped for good, or nil.
func (h *Health) Check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.failed) == 0 {
		return nil
	}
	names := make([]string, 0, len(h.failed))
	for n, r := range h.failed {
		names = append(names, fmt.Sprintf("%s (%s)", n, r))
	}
	sort.Strings(names)
	return fmt.Errorf("actors stopped for good: %s", strings.Join(names, ", "))
}
