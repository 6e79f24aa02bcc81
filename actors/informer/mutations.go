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
// shared with every component of the process, so such a change would reach the others. What
// lies below a cached top level taken from a SharedDecoder is the decoder's, which checks the
// whole object (apiserver's Options.CheckSharedMutations). Guarded by the informer's mu.
type mutationCheck struct {
	pristine map[string]runtime.Object // by storage key
	found    []error                   // changes seen when a changed object left the cache
}

func newMutationCheck() *mutationCheck {
	return &mutationCheck{pristine: map[string]runtime.Object{}}
}

// replace records that key's cached object old (nil: none) is now obj (nil: gone), checking
// old first.
func (c *mutationCheck) replace(resource, key string, old, obj runtime.Object) {
	if old != nil {
		if err := c.compare(resource, key, old); err != nil {
			c.found = append(c.found, err)
		}
	}
	if obj == nil {
		delete(c.pristine, key)
		return
	}
	c.pristine[key] = obj.DeepCopyObject()
}

// checkReplace is replace when the informer checks for mutations; i.mu is held.
func (i *Informer) checkReplace(key string, old, obj runtime.Object) {
	if i.check != nil {
		i.check.replace(i.kind.Resource, key, old, obj)
	}
}

// compare reports how obj is no longer what was cached under key. Semantic equality: reading
// a Quantity fills its string cache, which is no change.
func (c *mutationCheck) compare(resource, key string, obj runtime.Object) error {
	p, ok := c.pristine[key]
	if !ok || equality.Semantic.DeepEqual(p, obj) {
		return nil
	}
	return fmt.Errorf("informer %s: cached object %s was modified by a reader (DeepCopy before changing a cached object):\n%s", resource, key, diff.Diff(p, obj))
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
		if err := i.check.compare(i.kind.Resource, key, obj); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
