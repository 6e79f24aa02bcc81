package crd

import (
	"fmt"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// fieldManagers builds, once per subresource, kube-apiserver's CRD field manager for one
// served version: server-side apply and managedFields by the CRD's schemas. A CRD change
// publishes new kinds, so a cached manager never outlives the schema it was built from.
type fieldManagers struct {
	crd      *apiextensionsv1.CustomResourceDefinition
	mu       sync.Mutex
	byScope  map[string]*managedfields.FieldManager
	types    managedfields.TypeConverter
	typesErr error
	once     sync.Once
}

func (f *fieldManagers) get(c *custom, sub string, reset map[fieldpath.APIVersion]fieldpath.Filter) (*managedfields.FieldManager, error) {
	f.once.Do(func() { f.types, f.typesErr = TypeConverter(f.crd, nil) })
	if f.typesErr != nil {
		return nil, f.typesErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fm := f.byScope[sub]; fm != nil {
		return fm, nil
	}
	u := unstructuredScheme{custom: c}
	fm, err := managedfields.NewDefaultCRDFieldManager(f.types, u, u, u, c.gvk, c.gvk.GroupVersion(), sub, reset)
	if err != nil {
		return nil, err
	}
	if f.byScope == nil {
		f.byScope = map[string]*managedfields.FieldManager{}
	}
	f.byScope[sub] = fm
	return fm, nil
}

// FieldManager is the field manager of the resource (sub "") or a subresource.
func (c *custom) FieldManager(sub string, reset map[fieldpath.APIVersion]fieldpath.Filter) (*managedfields.FieldManager, error) {
	return c.fields.get(c, sub, reset)
}

// unstructuredScheme creates, defaults and converts this version's objects for the field
// manager: conversion None between versions only renames apiVersion, as kube's nop converter.
type unstructuredScheme struct{ custom *custom }

func (u unstructuredScheme) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	return obj, nil
}

func (u unstructuredScheme) Default(obj runtime.Object) {
	if o, ok := obj.(*unstructured.Unstructured); ok {
		u.custom.Default(o)
	}
}

func (u unstructuredScheme) Convert(in, out, _ any) error {
	src, ok1 := in.(*unstructured.Unstructured)
	dst, ok2 := out.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return fmt.Errorf("custom resources convert as unstructured objects, not %T to %T", in, out)
	}
	dst.Object = runtime.DeepCopyJSON(src.Object)
	return nil
}

func (u unstructuredScheme) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	src, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("custom resources convert as unstructured objects, not %T", in)
	}
	target, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{src.GroupVersionKind()})
	if !ok {
		return nil, fmt.Errorf("%s cannot be converted to %v", src.GroupVersionKind(), gv)
	}
	out := src.DeepCopy()
	out.SetGroupVersionKind(target)
	return out, nil
}

func (u unstructuredScheme) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}
