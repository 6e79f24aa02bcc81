package informer

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
)

// mutationCheck keeps a deep copy of each object as it was cached, to catch a reader that
// changed a shared one (as client-go's cache mutation detector does): cached objects are
// shared with every component of the process, so such a change would reach the others. An
// object taken from a SharedDecoder is checked too, whole (its managedFields and metadata,
// which the cache's own top level does not share): the apiserver's watchers and update path
// read it. Guarded by the informer's mu.
type mutationCheck struct {
	pristine map[string]pristine // by storage key
	found    []error             // changes seen when a changed object left the cache
}

// pristine is what was cached under a key, and the shared object it was made from (if any),
// as they were.
type pristine struct {
	cached           runtime.Object
	shared, sharedAs runtime.Object // the shared object itself, and a copy of it then
}

func newMutationCheck() *mutationCheck {
	return &mutationCheck{pristine: map[string]pristine{}}
}

// replace records that key's cached object old (nil: none) is now obj (nil: gone), made from
// shared (nil: decoded alone), checking old first.
func (c *mutationCheck) replace(resource, key string, old, obj, shared runtime.Object) {
	if old != nil {
		c.found = append(c.found, c.compare(resource, key, old)...)
	}
	if obj == nil {
		delete(c.pristine, key)
		return
	}
	p := pristine{cached: obj.DeepCopyObject()}
	if shared != nil {
		p.shared, p.sharedAs = shared, shared.DeepCopyObject()
	}
	c.pristine[key] = p
}

// checkReplace is replace when the informer checks for mutations; i.mu is held.
func (i *Informer) checkReplace(key string, old, obj, shared runtime.Object) {
	if i.check != nil {
		i.check.replace(i.kind.Resource, key, old, obj, shared)
	}
}

// compare reports how obj, and the shared object it was made from, are no longer what was
// cached under key. Semantic equality: reading a Quantity fills its string cache, which is no
// change.
func (c *mutationCheck) compare(resource, key string, obj runtime.Object) []error {
	p, ok := c.pristine[key]
	if !ok {
		return nil
	}
	var errs []error
	if !equality.Semantic.DeepEqual(p.cached, obj) {
		errs = append(errs, fmt.Errorf("informer %s: cached object %s was modified by a reader (DeepCopy before changing a cached object):\n%s", resource, key, diff.Diff(p.cached, obj)))
	}
	if p.shared != nil && !equality.Semantic.DeepEqual(p.sharedAs, p.shared) {
		errs = append(errs, fmt.Errorf("informer %s: the shared decode of %s (the apiserver's, its watchers' and the cache's) was modified by a reader:\n%s", resource, key, diff.Diff(p.sharedAs, p.shared)))
	}
	return errs
}

// CheckMutations makes the factory's informers keep a copy of every object they cache, so
// Mutations can tell whether a reader changed one. For tests: it doubles the caches' memory
// and adds a deep copy per event. Call it before the first informer is made.
func (f *Factory) CheckMutations() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, inf := range f.infs {
		if inf.check == nil {
			panic("informer: CheckMutations after informer " + inf.kind.Resource + " was made")
		}
	}
	f.checks = true
}

// Mutations reports every cached object of the factory's informers that a reader changed:
// those changed now, and those found changed when the log replaced them. Nil without
// CheckMutations.
func (f *Factory) Mutations() error {
	f.mu.Lock()
	infs := make([]*Informer, 0, len(f.infs))
	for _, inf := range f.infs {
		infs = append(infs, inf)
	}
	f.mu.Unlock()
	var errs []error
	for _, inf := range infs {
		errs = append(errs, inf.mutations()...)
	}
	return errors.Join(errs...)
}

func (i *Informer) mutations() []error {
	if i.check == nil {
		return nil
	}
	i.mu.RLock()
	defer i.mu.RUnlock()
	errs := append([]error(nil), i.check.found...)
	for key, obj := range i.objects {
		errs = append(errs, i.check.compare(i.kind.Resource, key, obj)...)
	}
	return errs
}
