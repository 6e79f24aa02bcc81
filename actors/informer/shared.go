package informer

import (
	"reflect"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas"
)

// Decoder decodes a value of the log that other readers of the process decode too, once for
// all of them: the object it returns (with its kind and resourceVersion set, managedFields
// kept) is shared and read only. The apiserver's watch cache is one.
type Decoder func(kind *schemas.Kind, value []byte, rev uint64) (runtime.Object, error)

// sharedDecoder is where a factory's informers of the log find the process's Decoder; one may
// be set at any time, since it decodes to what the informer's own decode would.
type sharedDecoder struct{ d atomic.Pointer[Decoder] }

func (s *sharedDecoder) get() Decoder {
	if s == nil {
		return nil
	}
	if d := s.d.Load(); d != nil {
		return *d
	}
	return nil
}

// ShareDecoded makes the factory's informers of the log take their objects from d instead of
// decoding each value again: in a process that serves the API, each write is then decoded
// once for its watchers and the informers together. The objects it returns must be shared
// read only by everyone, as cached objects are (DeepCopy before changing one).
func (f *Factory) ShareDecoded(d Decoder) { f.decoder.d.Store(&d) }

// fromShared is what the cache keeps of a shared decoded object: a copy of its top-level
// struct without managedFields (no reader of a cache needs them, see decode). Everything
// under that struct stays shared. False for objects a shallow copy cannot strip without
// touching the shared one (unstructured objects keep metadata in a shared map).
func fromShared(obj runtime.Object) (runtime.Object, bool) {
	if _, ok := obj.(runtime.Unstructured); ok {
		return nil, false
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, false
	}
	if m.GetManagedFields() == nil {
		return obj, true
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	out, ok := c.Interface().(runtime.Object)
	if !ok {
		return nil, false
	}
	cm, err := meta.Accessor(out)
	if err != nil {
		return nil, false
	}
	cm.SetManagedFields(nil)
	return out, true
}
