package schemas

import (
	"maps"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TopLevelCopy is a copy of obj's top level that shares everything below it: a typed object's
// struct, an unstructured object's object and metadata maps. Setting a metadata field (or a
// whole top-level field) on the copy leaves obj as it was, so a reader of an object shared
// read-only (the apiserver's decode of a write) can drop or replace a field for itself
// without copying the object whole.
func TopLevelCopy(obj runtime.Object) runtime.Object {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		top := maps.Clone(u.Object)
		if md, ok := top["metadata"].(map[string]any); ok {
			top["metadata"] = maps.Clone(md)
		}
		return &unstructured.Unstructured{Object: top}
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return obj.DeepCopyObject() // no kind is served so; still a copy of its own
	}
	cp := reflect.New(v.Elem().Type())
	cp.Elem().Set(v.Elem())
	return cp.Interface().(runtime.Object)
}
