// Package logvalue is the one encoding of objects as state-log values. Built-in kinds are
// stored as Kubernetes protobuf, as kube-apiserver stores them in etcd: the "k8s\x00" magic,
// then a runtime.Unknown naming the apiVersion and kind around the object's generated
// protobuf. Kinds without generated protobuf (custom resources) and CustomResourceDefinitions
// (JSON in kube-apiserver's etcd too) are stored as JSON. Readers tell the two apart by the
// magic, so values written as JSON by an older Skiff still read.
package logvalue

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/schemas"
)

// Encode is the log value of obj, converted first to the version its kind is stored as
// (schemas.Kind.StoredAs). The resourceVersion is never stored: the log's revision is it.
func Encode(obj runtime.Object) ([]byte, error) { return EncodeWith(obj, &runtime.SimpleAllocator{}) }

// EncodeWith is Encode into memory from alloc where the value is protobuf (see
// schemas.EncodeProtobufWith); a JSON value is a new slice.
func EncodeWith(obj runtime.Object, alloc runtime.MemoryAllocator) ([]byte, error) {
	if k, ok := schemas.ByGVK(obj.GetObjectKind().GroupVersionKind()); ok && k.StoredAs != nil {
		stored, err := k.StoredAs.ToStored(obj)
		if err != nil {
			return nil, err
		}
		obj = stored
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("object %T has no metadata: %w", obj, err)
	}
	rv := m.GetResourceVersion()
	m.SetResourceVersion("")
	defer m.SetResourceVersion(rv)
	if storedAsProtobuf(obj) {
		if data, ok, err := schemas.EncodeProtobufWith(obj, alloc); ok {
			return data, err
		}
	}
	return json.Marshal(obj)
}

// storedAsProtobuf: objects of obj's type are stored as protobuf (CRDs are JSON in
// kube-apiserver's etcd too).
func storedAsProtobuf(obj runtime.Object) bool {
	_, crd := obj.(*apiextensionsv1.CustomResourceDefinition)
	return !crd
}

// Decode turns the value of kind k stored at rev back into a typed (or, for a custom kind,
// unstructured) object with its GVK set and resourceVersion rev, converted from the version
// it is stored as.
func Decode(k *schemas.Kind, value []byte, rev uint64) (runtime.Object, error) {
	stored := schemas.Stored(k)
	obj := stored.New()
	if err := decodeInto(value, stored.GVK, obj); err != nil {
		return nil, fmt.Errorf("stored %s is corrupt: %w", k.Resource, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(stored.GVK)
	if k.StoredAs != nil {
		var err error
		if obj, err = k.StoredAs.FromStored(obj); err != nil {
			return nil, fmt.Errorf("stored %s does not convert to %s: %w", k.Resource, k.GVK.GroupVersion(), err)
		}
		obj.GetObjectKind().SetGroupVersionKind(k.GVK)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("stored %s: %w", k.Resource, err)
	}
	m.SetResourceVersion(strconv.FormatUint(rev, 10))
	return obj, nil
}

// Unmarshal decodes value into into, a new typed object of the kind the value is stored as,
// as it is stored: no conversion, no GVK or resourceVersion set.
func Unmarshal(value []byte, into runtime.Object) error {
	gvk, err := schemas.ObjectKind(into)
	if err != nil {
		return err
	}
	return decodeInto(value, gvk, into)
}

func decodeInto(value []byte, want schema.GroupVersionKind, into runtime.Object) error {
	if !schemas.IsProtobuf(value) {
		return json.Unmarshal(value, into)
	}
	if !storedAsProtobuf(into) {
		return fmt.Errorf("a protobuf value for %s, which is stored as JSON", want.Kind)
	}
	err := schemas.UnmarshalProtobuf(value, want, false, into)
	if ke := (*schemas.ProtobufKindError)(nil); errors.As(err, &ke) {
		return fmt.Errorf("the value holds a %s, not a %s", describe(ke.Got), describe(want))
	}
	return err
}

func describe(gvk schema.GroupVersionKind) string {
	if gvk.Kind == "" {
		return "value without a kind"
	}
	return gvk.GroupVersion().String() + " " + gvk.Kind
}
