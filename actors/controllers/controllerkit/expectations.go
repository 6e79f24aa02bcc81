package controllerkit

import (
	"sync"
	"time"
)

// ExpectationsTTL: expectations older than this are treated as met, so a lost watch event can
// stall a controller for at most this long (kube-controller-manager uses 5 minutes too).
const ExpectationsTTL = 5 * time.Minute

// Expectations remember the creates and deletes a controller has issued but not yet seen come
// back through its informer. While any are outstanding the controller must not act on the
// cache for that key, or it would create (or delete) the same pods twice.
type Expectations struct {
	mu  sync.Mutex
	m   map[string]*expectation
	now func() time.Time
}

type expectation struct {
	adds int
	dels map[string]bool // keys of objects whose deletion is awaited
	at   time.Time
}

// NewExpectations returns an empty set.
func NewExpectations() *Expectations {
	return &Expectations{m: map[string]*expectation{}, now: time.Now}
}

func (e *Expectations) get(key string) *expectation {
	x := e.m[key]
	if x == nil {
		x = &expectation{dels: map[string]bool{}}
		e.m[key] = x
	}
	x.at = e.now()
	return x
}

// ExpectCreations records n creates about to be issued for key.
func (e *Expectations) ExpectCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(key).adds += n
}

// CreationObserved lowers key's outstanding creates by one (seen, or the create failed).
func (e *Expectations) CreationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.m[key]; x != nil && x.adds > 0 {
		x.adds--
	}
}

// ExpectDeletions records the objects about to be deleted for key.
func (e *Expectations) ExpectDeletions(key string, objs []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.get(key)
	for _, o := range objs {
		x.dels[o] = true
	}
}

// DeletionObserved marks obj's deletion as seen (or as failed) for key.
func (e *Expectations) DeletionObserved(key, obj string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.m[key]; x != nil {
		delete(x.dels, obj)
	}
}

// Satisfied reports whether key has nothing in flight (or its expectations expired).
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.m[key]
	if x == nil {
		return true
	}
	if x.adds <= 0 && len(x.dels) == 0 {
		return true
	}
	return e.now().Sub(x.at) > ExpectationsTTL
}

// Pending returns key's outstanding creates and deletes.
func (e *Expectations) Pending(key string) (adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.m[key]; x != nil {
		return x.adds, len(x.dels)
	}
	return 0, 0
}

// Forget drops key (its object is gone).
func (e *Expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
