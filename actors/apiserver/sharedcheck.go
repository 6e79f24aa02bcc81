package apiserver

import (
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
)

// sharedCheck keeps a pristine copy of each shared decode the server's reads and writes took
// (readEntry) and handed to the process's informers (DecodeShared), to catch code that
// changed one: the same object is what every watcher of its revision encodes, what the next
// update starts from, and what lies below each informer's cached top level. Each reuse
// compares it, as does Server.SharedMutations. For tests (Options.CheckSharedMutations): it keeps every object it
// saw, and deep copies each once.
type sharedCheck struct {
	mu       sync.Mutex
	pristine map[runtime.Object]sharedPristine
	found    []error
}

type sharedPristine struct {
	what string // kind, name and revision, for the report
	obj  runtime.Object
}

func newSharedCheck() *sharedCheck {
	return &sharedCheck{pristine: map[runtime.Object]sharedPristine{}}
}

// saw records the shared decode obj of key at rev the first time, and checks it every time
// after.
func (c *sharedCheck) saw(key string, rev uint64, obj runtime.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pristine[obj]
	if !ok {
		c.pristine[obj] = sharedPristine{what: fmt.Sprintf("%s at revision %d", key, rev), obj: obj.DeepCopyObject()}
		return
	}
	if err := p.compare(obj); err != nil {
		c.found = append(c.found, err)
		c.pristine[obj] = sharedPristine{what: p.what, obj: obj.DeepCopyObject()} // report each change once
	}
}

// compare is an error when obj is no longer what was decoded. Semantic equality: reading a
// Quantity fills its string cache, which is no change.
func (p sharedPristine) compare(obj runtime.Object) error {
	if equality.Semantic.DeepEqual(p.obj, obj) {
		return nil
	}
	return fmt.Errorf("apiserver: the shared decode of %s was modified (work on a copy):\n%s", p.what, diff.Diff(p.obj, obj))
}

// mutations is every change found so far and every shared decode changed now.
func (c *sharedCheck) mutations() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	errs := append([]error(nil), c.found...)
	for obj, p := range c.pristine {
		if err := p.compare(obj); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SharedMutations reports every shared decode of a stored object (what watchers encode and
// updates start from) that was changed after it was decoded. Nil without
// Options.CheckSharedMutations.
func (s *Server) SharedMutations() error {
	if s.shared == nil {
		return nil
	}
	return s.shared.mutations()
}
