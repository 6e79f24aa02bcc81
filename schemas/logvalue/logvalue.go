// Package logvalue is the one encoding of objects as state-log values. Built-in kinds are
// stored as Kubernetes protobuf, as kube-apiserver stores them in etcd: the "k8s\x00" magic,
// then a runtime.Unknown naming the apiVersion and kind around the object's generated
// protobuf. Kinds without generated protobuf (custom resources) and CustomResourceDefinitions
// (JSON in kube-apiserver's etcd too) are stored as JSON. Readers tell the two apart by the
// magic, so values written as JSON by an older Skiff still read.
package logvalue

import (
	"bytes"
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

// magic opens every protobuf value: the prefix of k8s.io/apimachinery's protobuf serializer
// (unexported there), which no JSON value starts with.
var magic = []byte{0x6b, 0x38, 0x73, 0x00}

// message is what the generated protobuf of k8s.io/api types implements.
type message interface {
	runtime.ProtobufMarshaller // Size, MarshalTo (the envelope takes MarshalToSizedBuffer when there)
	Unmarshal([]byte) error
	Reset()
}

// IsProtobuf reports whether value is stored as protobuf (else it is JSON).
func IsProtobuf(value []byte) bool { return bytes.HasPrefix(value, magic) }

// Encode is the log value of obj, converted first to the version its kind is stored as
// (schemas.Kind.StoredAs). The resourceVersion is never stored: the log's revision is it.
func Encode(obj runtime.Object) ([]byte, error) {
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
	if pb, ok := asMessage(obj); ok {
		return encodeProtobuf(obj, pb)
	}
	return json.Marshal(obj)
}

// asMessage is obj's protobuf, for the kinds stored as protobuf.
func asMessage(obj runtime.Object) (message, bool) {
	if _, crd := obj.(*apiextensionsv1.CustomResourceDefinition); crd {
		return nil, false
	}
	pb, ok := obj.(message)
	return pb, ok
}

func encodeProtobuf(obj runtime.Object, pb message) ([]byte, error) {
	gvk, err := kindOf(obj)
	if err != nil {
		return nil, err
	}
	unk := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}}
	size := pb.Size()
	// runtime.Unknown's own nesting writes the object into the envelope with no copy; the
	// envelope adds a tag and a length of at most maxVarintLen bytes before it.
	data := make([]byte, len(magic)+unk.Size()+1+maxVarintLen+size)
	n, err := unk.NestedMarshalTo(data[len(magic):], pb, uint64(size))
	if err != nil {
		return nil, err
	}
	copy(data, magic)
	return data[:len(magic)+n], nil
}

const maxVarintLen = 10

// kindOf is obj's group, version and kind: as set, or as the scheme knows its type.
func kindOf(obj runtime.Object) (schema.GroupVersionKind, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" && gvk.Version != "" {
		return gvk, nil
	}
	gvks, _, err := schemas.Scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return gvks[0], nil
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
	gvk, err := kindOf(into)
	if err != nil {
		return err
	}
	return decodeInto(value, gvk, into)
}

func decodeInto(value []byte, want schema.GroupVersionKind, into runtime.Object) error {
	if !IsProtobuf(value) {
		return json.Unmarshal(value, into)
	}
	pb, ok := asMessage(into)
	if !ok {
		return fmt.Errorf("a protobuf value for %s, which is stored as JSON", want.Kind)
	}
	raw, err := unwrap(value, want)
	if err != nil {
		return err
	}
	pb.Reset()
	return pb.Unmarshal(raw)
}

// unwrap is the object's protobuf inside a protobuf value's envelope, which must name want.
func unwrap(value []byte, want schema.GroupVersionKind) ([]byte, error) {
	var unk runtime.Unknown
	if err := unk.Unmarshal(value[len(magic):]); err != nil {
		return nil, fmt.Errorf("protobuf envelope: %w", err)
	}
	if got := unk.GroupVersionKind(); got != want {
		return nil, fmt.Errorf("the value holds a %s, not a %s", describe(got), describe(want))
	}
	if unk.ContentEncoding != "" {
		return nil, errors.New("the value's contentEncoding " + strconv.Quote(unk.ContentEncoding) + " is not supported")
	}
	return unk.Raw, nil
}

func describe(gvk schema.GroupVersionKind) string {
	if gvk.Kind == "" {
		return "value without a kind"
	}
	return gvk.GroupVersion().String() + " " + gvk.Kind
}
