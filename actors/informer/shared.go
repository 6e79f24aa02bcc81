package informer

import (
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas"
)

// SharedDecoder decodes a state-log value once for the whole process. In a process that runs
// the apiserver, its watch cache is one: the informers, the apiserver's watchers and its update
// path then decode each write once between them, not once each.
type SharedDecoder interface {
	// DecodeShared is the value of kind stored at rev (for a delete, the key's last value at
	// the delete's revision), typed as kind with its GVK set, resourceVersion rev and its
	// managedFields. It is shared with other readers: nobody may modify it. An error is the
	// value's (corrupt), and the same one for every reader.
	DecodeShared(kind *schemas.Kind, value []byte, rev uint64) (runtime.Object, error)
}

// sharedDecoder holds a factory's SharedDecoder, set at any time: a component may ask for an
// informer before the apiserver it shares with exists.
type sharedDecoder struct{ d atomic.Pointer[SharedDecoder] }

func (s *sharedDecoder) get() SharedDecoder {
	if s == nil {
		return nil
	}
	if p := s.d.Load(); p != nil {
		return *p
	}
	return nil
}

// ShareDecodes makes the factory's informers over the log take their objects from d instead of
// decoding each event themselves. Each keeps its own copy of the object's top level, without
// managedFields; what lies below (spec, status, labels, ...) is d's, shared read-only.
func (f *Factory) ShareDecodes(d SharedDecoder) {
	f.shared.d.Store(&d)
}

// withoutManagedFields is obj's top level copied (schemas.TopLevelCopy), its managedFields
// left out; everything below the top level is obj's.
func withoutManagedFields(obj runtime.Object) runtime.Object {
	out := schemas.TopLevelCopy(obj)
	if m, err := meta.Accessor(out); err == nil {
		m.SetManagedFields(nil)
	}
	return out
}
