package apiserver

import (
	"fmt"
	"reflect"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/logvalue"
)

// encodeForStorage and decodeStored are the log's codec (package logvalue): protobuf for
// built-in kinds, JSON for custom ones; the resourceVersion is the revision, never stored.
func encodeForStorage(obj runtime.Object) ([]byte, error) { return logvalue.Encode(obj) }

// storageBuffer lends a write the buffer of its stored form, which is garbage once the log has
// it (the NATS client copies what it publishes): those encodings were 3% of the bytes the
// server allocated under the system bench. Bytes from encode are valid until the next encode
// or release.
type storageBuffer struct{ alloc *runtime.Allocator }

func borrowStorageBuffer() storageBuffer {
	return storageBuffer{runtime.AllocatorPool.Get().(*runtime.Allocator)}
}

func (b storageBuffer) encode(obj runtime.Object) ([]byte, error) {
	return logvalue.EncodeWith(obj, b.alloc)
}

func (b storageBuffer) release() { runtime.AllocatorPool.Put(b.alloc) }

// decodeStored turns a log value back into a typed object of kind k stamped with its revision,
// converted from the version it is stored as.
func decodeStored(k *schemas.Kind, value []byte, rev uint64) (runtime.Object, error) {
	return logvalue.Decode(k, value, rev)
}

func setTypeMeta(obj runtime.Object, k *schemas.Kind) {
	obj.GetObjectKind().SetGroupVersionKind(k.GVK)
}

func mustMeta(obj runtime.Object) metav1.Object {
	m, err := meta.Accessor(obj)
	if err != nil {
		panic(fmt.Sprintf("object %T has no metadata: %v", obj, err))
	}
	return m
}

func formatRev(rev uint64) string { return fmt.Sprintf("%d", rev) }

func groupResource(k *schemas.Kind) schema.GroupResource {
	return schema.GroupResource{Group: k.GVK.Group, Resource: k.Resource}
}

func hasSubresource(k *schemas.Kind, sub string) bool {
	for _, s := range k.Subresources {
		if s == sub {
			return true
		}
	}
	return false
}

// toMap and fromMap move objects through their JSON shape so that top-level sections (spec,
// status, metadata) can be swapped generically for every kind.
// An unstructured object's map is copied: callers change what they get.
func toMap(obj runtime.Object) (map[string]any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return runtime.DeepCopyJSON(u.Object), nil
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

func fromMap(k *schemas.Kind, m map[string]any) (runtime.Object, error) {
	if k.Custom != nil {
		u := &unstructured.Unstructured{Object: m}
		setTypeMeta(u, k)
		return u, nil
	}
	obj := k.New()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, obj); err != nil {
		return nil, err
	}
	setTypeMeta(obj, k)
	return obj, nil
}

// withSection returns dst with its top-level field `section` replaced by (a copy of) src's.
func withSection(k *schemas.Kind, dst, src runtime.Object, section string) (runtime.Object, error) {
	if df, ok := topField(dst, section); ok {
		sf, _ := topField(src, section)
		if c, ok := deepCopied(sf); ok {
			sf = c
		} else {
			sf, _ = topField(src.DeepCopyObject(), section)
		}
		df.Set(sf)
		setTypeMeta(dst, k)
		return dst, nil
	}
	dm, err := toMap(dst)
	if err != nil {
		return nil, err
	}
	sm, err := toMap(src)
	if err != nil {
		return nil, err
	}
	if v, ok := sm[section]; ok {
		dm[section] = v
	} else {
		delete(dm, section)
	}
	return fromMap(k, dm)
}

// statusOnto is what a status write stores: cur with next's status; defaulted reports that
// the result needs no defaulting after. For a typed object the result shares everything
// but its top level and its status with cur (the shared decode: read-only), as nothing after
// a status write's merge changes it below the top level but for the status: next is
// defaulted as kube-apiserver defaults a request as it decodes it, and its status taken over
// (next is the request's own and is dropped after); cur was defaulted when it was written.
// Other objects get a copy of cur, defaulted whole after.
func statusOnto(k *schemas.Kind, cur, next runtime.Object) (_ runtime.Object, defaulted bool, _ error) {
	if _, typed := topField(cur, "status"); !typed || reflect.TypeOf(cur) != reflect.TypeOf(next) {
		out, err := withSection(k, cur.DeepCopyObject(), next, "status")
		return out, false, err
	}
	schemas.DefaultUpdate(next, cur)
	out := schemas.TopLevelCopy(cur)
	of, _ := topField(out, "status")
	nf, _ := topField(next, "status")
	of.Set(nf)
	setTypeMeta(out, k)
	return out, true, nil
}

// deepCopied copies a field of a typed object by its generated DeepCopy (a PodStatus, not
// the whole Pod); ok is false for a type without one.
func deepCopied(v reflect.Value) (reflect.Value, bool) {
	if !v.CanAddr() {
		return reflect.Value{}, false
	}
	m := v.Addr().MethodByName("DeepCopy")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 || m.Type().Out(0) != v.Addr().Type() {
		return reflect.Value{}, false
	}
	out := m.Call(nil)[0]
	if out.IsNil() {
		return reflect.Value{}, false
	}
	return out.Elem(), true
}

// specChanged reports whether anything outside metadata and status differs: what bumps
// metadata.generation.
func specChanged(a, b runtime.Object) bool {
	if av, bv, ok := typedPair(a, b); ok {
		// Kubernetes' strategies compare spec with semantic equality (quantities by value, nil
		// and empty alike), as the JSON shapes below do.
		for i := range av.NumField() {
			f := av.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || f.Anonymous || name == "-" || name == "metadata" || name == "status" {
				continue
			}
			if !apiequality.Semantic.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
				return true
			}
		}
		return false
	}
	am, err1 := toMap(a)
	bm, err2 := toMap(b)
	if err1 != nil || err2 != nil {
		return true
	}
	for _, m := range []map[string]any{am, bm} {
		delete(m, "metadata")
		delete(m, "status")
		delete(m, "kind")
		delete(m, "apiVersion")
	}
	return !reflect.DeepEqual(am, bm)
}

// typedPair is a and b as structs when both are the same typed (not unstructured) kind.
func typedPair(a, b runtime.Object) (av, bv reflect.Value, ok bool) {
	av, bv = reflect.ValueOf(a), reflect.ValueOf(b)
	if av.Kind() != reflect.Pointer || av.Type() != bv.Type() || av.Elem().Kind() != reflect.Struct || av.IsNil() || bv.IsNil() {
		return av, bv, false
	}
	if _, u := a.(*unstructured.Unstructured); u {
		return av, bv, false
	}
	return av.Elem(), bv.Elem(), true
}

// topField is the top-level field of a typed object that JSON names name: the same field the
// map shape would hold, without converting the whole object.
func topField(obj runtime.Object, name string) (reflect.Value, bool) {
	v, _, ok := typedPair(obj, obj)
	if !ok {
		return reflect.Value{}, false
	}
	for i := range v.NumField() {
		if n, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ","); n == name {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}
