package schemas

import (
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// ContentTypeProtobuf is Kubernetes' protobuf media type, which kube-apiserver accepts and
// serves for built-in kinds (its own components talk it).
const ContentTypeProtobuf = runtime.ContentTypeProtobuf

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
	var unk runtime.Unknown
	if _, _, err := protobufSerializer.Decode(data, nil, &unk); err != nil {
		return nil, fail(fmt.Errorf("the body is not a Kubernetes protobuf envelope: %w", err))
	}
	gvk := unk.GroupVersionKind()
	if gvk.Kind == "" {
		gvk.Kind = k.GVK.Kind
	}
	if gvk.GroupVersion().Empty() {
		gvk = k.GVK.GroupVersion().WithKind(gvk.Kind)
	}
	if gvk != k.GVK {
		return nil, fail(fmt.Errorf("the body is a %s (%s) but the request is for %s (%s)",
			gvk.Kind, orUnset(unk.APIVersion), k.GVK.Kind, k.GVK.GroupVersion()))
	}
	if unk.ContentEncoding != "" {
		return nil, fail(fmt.Errorf("the body's contentEncoding %q is not supported", unk.ContentEncoding))
	}
	obj := k.New()
	if err := obj.(protobufMessage).Unmarshal(unk.Raw); err != nil {
		return nil, fail(fmt.Errorf("invalid protobuf %s: %w", k.GVK.Kind, err))
	}
	obj.GetObjectKind().SetGroupVersionKind(k.GVK)
	return obj, nil
}

// EncodeProtobuf serializes obj in Kubernetes protobuf with its apiVersion and kind in the
// envelope (from the scheme when obj lacks them; obj itself is not modified). ok is false for
// an object without a protobuf form (custom resources, tables), which is then not encoded.
func EncodeProtobuf(obj runtime.Object) (data []byte, ok bool, err error) {
	if _, pb := obj.(protobufMessage); !pb {
		return nil, false, nil
	}
	if obj.GetObjectKind().GroupVersionKind().Kind == "" {
		gvks, _, err := Scheme.ObjectKinds(obj)
		if err != nil {
			return nil, true, err
		}
		obj = obj.DeepCopyObject()
		obj.GetObjectKind().SetGroupVersionKind(preferredKind(gvks))
	}
	data, err = runtime.Encode(protobufSerializer, obj)
	return data, true, err
}
