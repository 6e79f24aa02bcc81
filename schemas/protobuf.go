package schemas

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// ContentTypeProtobuf is Kubernetes' protobuf media type, which kube-apiserver accepts and
// serves for built-in kinds (its own components talk it).
const ContentTypeProtobuf = runtime.ContentTypeProtobuf

// ProtobufMagic opens every Kubernetes protobuf document: the prefix of k8s.io/apimachinery's
// protobuf serializer (unexported there), which no JSON document starts with.
var ProtobufMagic = []byte("k8s\x00")

// IsProtobuf reports whether data is Kubernetes protobuf (else JSON or YAML).
func IsProtobuf(data []byte) bool { return bytes.HasPrefix(data, ProtobufMagic) }

// protobufMessage is what the generated protobuf of the k8s.io/api types implements.
type protobufMessage interface {
	runtime.ProtobufMarshaller
	Unmarshal([]byte) error
}

var protobufSerializer = protobuf.NewSerializer(Scheme, Scheme)

// HasProtobuf reports whether objects of kind k have a Kubernetes protobuf form: the built-in
// kinds do, custom resources do not.
func HasProtobuf(k *Kind) bool {
	if k.Custom != nil {
		return false
	}
	if has, ok := protobufKinds.Load(k.GVK); ok {
		return has.(bool)
	}
	_, has := k.New().(protobufMessage)
	protobufKinds.Store(k.GVK, has)
	return has
}

// protobufKinds caches HasProtobuf of the built-in kinds (a fixed set), which clients ask per
// request.
var protobufKinds sync.Map

// DecodeProtobuf decodes one request body of kind k in Kubernetes protobuf: the "k8s\x00"
// magic, then a runtime.Unknown naming the apiVersion and kind around the object. A body
// naming another kind or version is an error; one naming none gets k's. Protobuf has no
// unknown or duplicate fields to report (unknown field numbers are skipped, as
// kube-apiserver's decoder skips them), so there is no strict mode. The result has TypeMeta set.
func DecodeProtobuf(k *Kind, data []byte) (runtime.Object, error) {
	fail := func(err error) error { return &DecodeError{Index: -1, Item: -1, Kind: k.GVK.Kind, Err: err} }
	if !HasProtobuf(k) {
		return nil, fail(fmt.Errorf("%s (%s) has no protobuf form", k.GVK.Kind, k.GVK.GroupVersion()))
	}
	if len(data) == 0 {
		return nil, fail(errors.New("the body is empty"))
	}
	obj := k.New()
	if err := UnmarshalProtobuf(data, k.GVK, true, obj); err != nil {
		return nil, fail(err)
	}
	obj.GetObjectKind().SetGroupVersionKind(k.GVK)
	return obj, nil
}

// UnmarshalProtobuf decodes data, Kubernetes protobuf of an object of kind want, into into (a
// new object of that kind's type). An envelope naming another kind is an error; one naming
// none is taken as want when unnamedIsWant (a client may leave it out; a stored value may not).
func UnmarshalProtobuf(data []byte, want schema.GroupVersionKind, unnamedIsWant bool, into runtime.Object) error {
	pb, ok := into.(protobufMessage)
	if !ok {
		return fmt.Errorf("%s has no protobuf form", want.Kind)
	}
	var unk runtime.Unknown
	if _, _, err := protobufSerializer.Decode(data, nil, &unk); err != nil {
		return fmt.Errorf("not a Kubernetes protobuf envelope: %w", err)
	}
	gvk := unk.GroupVersionKind()
	if unnamedIsWant && gvk.Kind == "" {
		gvk.Kind = want.Kind
	}
	if unnamedIsWant && gvk.GroupVersion().Empty() {
		gvk = want.GroupVersion().WithKind(gvk.Kind)
	}
	if gvk != want {
		return &ProtobufKindError{Got: gvk, Want: want}
	}
	if unk.ContentEncoding != "" {
		return fmt.Errorf("the body's contentEncoding %q is not supported", unk.ContentEncoding)
	}
	if err := pb.Unmarshal(unk.Raw); err != nil {
		return fmt.Errorf("invalid protobuf %s: %w", want.Kind, err)
	}
	return nil
}

// EncodeProtobuf serializes obj in Kubernetes protobuf with its apiVersion and kind in the
// envelope (from the scheme when obj lacks them; obj itself is not modified). ok is false for
// an object without a protobuf form (custom resources, tables), which is then not encoded.
func EncodeProtobuf(obj runtime.Object) (data []byte, ok bool, err error) {
	if _, pb := obj.(protobufMessage); !pb {
		return nil, false, nil
	}
	if obj.GetObjectKind().GroupVersionKind().Kind == "" {
		gvk, err := ObjectKind(obj)
		if err != nil {
			return nil, true, err
		}
		obj = obj.DeepCopyObject()
		obj.GetObjectKind().SetGroupVersionKind(gvk)
	}
	data, err = runtime.Encode(protobufSerializer, obj)
	return data, true, err
}

// ObjectKind is obj's group, version and kind: as set, or as the scheme knows its type.
func ObjectKind(obj runtime.Object) (schema.GroupVersionKind, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" && gvk.Version != "" {
		return gvk, nil
	}
	gvks, _, err := Scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return preferredKind(gvks), nil
}

// ProtobufKindError: a protobuf envelope names another kind than the one asked for.
type ProtobufKindError struct{ Got, Want schema.GroupVersionKind }

func (e *ProtobufKindError) Error() string {
	return fmt.Sprintf("the body is a %s (%s) but the request is for %s (%s)",
		orUnset(e.Got.Kind), orUnset(e.Got.GroupVersion().String()), e.Want.Kind, e.Want.GroupVersion())
}
