package apiserver

import (
	"maps"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// withoutRV is obj with no resourceVersion, for encoding, leaving obj (which may be a shared
// decode) untouched: a typed object's struct and an unstructured one's top and metadata maps
// are copied, nothing under them.
func withoutRV(obj runtime.Object) runtime.Object {
	if mustMeta(obj).GetResourceVersion() == "" {
		return obj
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		top := maps.Clone(u.Object)
		if md, ok := top["metadata"].(map[string]any); ok {
			md = maps.Clone(md)
			delete(md, "resourceVersion")
			top["metadata"] = md
		}
		return &unstructured.Unstructured{Object: top}
	}
	var out runtime.Object
	if v := reflect.ValueOf(obj); v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.Struct {
		c := reflect.New(v.Elem().Type())
		c.Elem().Set(v.Elem())
		out = c.Interface().(runtime.Object)
	} else {
		out = obj.DeepCopyObject()
	}
	mustMeta(out).SetResourceVersion("")
	return out
}
