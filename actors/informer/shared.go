package informer

import (
	"reflect"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// withoutManagedFields is obj's top level copied, its managedFields left out; everything below
// the top level is obj's. A typed object copies its struct; an unstructured one its object map
// and metadata map.
func withoutManagedFields(obj runtime.Object) runtime.Object {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		out := &unstructured.Unstructured{Object: make(map[string]any, len(u.Object))}
		for k, v := range u.Object {
			out.Object[k] = v
		}
		if md, ok := u.Object["metadata"].(map[string]any); ok {
			own := make(map[string]any, len(md))
			for k, v := range md {
				if k != "managedFields" {
					own[k] = v
				}
			}
			out.Object["metadata"] = own
		}
		return out
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		obj = obj.DeepCopyObject() // no kind is served so; still a copy of its own
		v = reflect.ValueOf(obj)
	}
	cp := reflect.New(v.Elem().Type())
	cp.Elem().Set(v.Elem())
	out := cp.Interface().(runtime.Object)
	if m, err := meta.Accessor(out); err == nil {
		m.SetManagedFields(nil)
	}
	return out
}
