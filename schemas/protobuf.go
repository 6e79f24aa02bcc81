package schemas

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
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
	unk, err := readEnvelope(data)
	if err != nil { // a form it does not read (protobuf groups): the serializer's own verdict
		if _, _, err := protobufSerializer.Decode(data, nil, &unk); err != nil {
			return fmt.Errorf("not a Kubernetes protobuf envelope: %w", err)
		}
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
	return EncodeProtobufWith(obj, &runtime.SimpleAllocator{})
}

// EncodeProtobufWith is EncodeProtobuf into memory from alloc: a pooled runtime.Allocator
// makes data its buffer, which the next encoding with it overwrites.
func EncodeProtobufWith(obj runtime.Object, alloc runtime.MemoryAllocator) (data []byte, ok bool, err error) {
	if _, pb := obj.(protobufMessage); !pb {
		return nil, false, nil
	}
	if obj.GetObjectKind().GroupVersionKind().Kind == "" {
		gvk, err := ObjectKind(obj)
		if err != nil {
			return nil, true, err
		}
		if m, ok := obj.(sizedMarshaller); ok {
			obj = &kindedObject{Object: obj, sizedMarshaller: m, gvk: gvk}
		} else {
			obj = obj.DeepCopyObject()
			obj.GetObjectKind().SetGroupVersionKind(gvk)
		}
	}
	// The serializer sizes the envelope, allocates it once and writes it whole: kept as written,
	// not copied into a growing buffer as runtime.Encode would.
	var out written
	err = protobufSerializer.EncodeWithAllocator(obj, &out, alloc)
	return out.data, true, err
}

// written keeps what is written to it; the first write's slice is kept as it is (the
// serializer took it from the allocator for this one encoding).
type written struct{ data []byte }

func (w *written) Write(p []byte) (int, error) {
	if w.data == nil {
		w.data = p
	} else {
		w.data = append(w.data, p...)
	}
	return len(p), nil
}

// sizedMarshaller is the generated protobuf code's sizing and in-place marshalling, which the
// serializer uses to encode an object with one allocation.
type sizedMarshaller interface {
	runtime.ProtobufMarshaller
	runtime.ProtobufReverseMarshaller
}

// kindedObject presents an object without apiVersion and kind as having gvk, so that the
// serializer writes gvk into the envelope without a deep copy of the object to set it on (the
// object may be shared, and is never modified).
type kindedObject struct {
	runtime.Object
	sizedMarshaller
	gvk schema.GroupVersionKind
}

func (k *kindedObject) GetObjectKind() schema.ObjectKind                { return k }
func (k *kindedObject) GroupVersionKind() schema.GroupVersionKind       { return k.gvk }
func (k *kindedObject) SetGroupVersionKind(gvk schema.GroupVersionKind) { k.gvk = gvk }

// readEnvelope reads the runtime.Unknown after the protobuf magic as the serializer's decoder
// does, except that Raw is left pointing into data where the decoder copies it: the object
// decoded from Raw copies whatever it keeps. It reads a subset of what the decoder reads: no
// protobuf groups, which no Kubernetes client writes.
func readEnvelope(data []byte) (runtime.Unknown, error) {
	var unk runtime.Unknown
	switch {
	case !IsProtobuf(data):
		return unk, errors.New("the \"k8s\\x00\" prefix is missing")
	case len(data) == len(ProtobufMagic):
		return unk, errors.New("nothing follows the prefix")
	}
	err := eachBytesField(data[len(ProtobufMagic):], 4, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			if err := readTypeMeta(v, &unk.TypeMeta); err != nil {
				return fmt.Errorf("typeMeta: %w", err)
			}
		case 2:
			unk.Raw = v
		case 3:
			unk.ContentEncoding = string(v)
		case 4:
			unk.ContentType = string(v)
		}
		return nil
	})
	return unk, err
}

// readTypeMeta reads runtime.TypeMeta's apiVersion (1) and kind (2).
func readTypeMeta(b []byte, tm *runtime.TypeMeta) error {
	return eachBytesField(b, 2, func(num protowire.Number, v []byte) error {
		if num == 1 {
			tm.APIVersion = string(v)
		} else {
			tm.Kind = string(v)
		}
		return nil
	})
}

// eachBytesField calls f with the value of each field of message b numbered 1 to last, all of
// which are bytes or strings in runtime.Unknown and runtime.TypeMeta (another wire type is an
// error); other fields are skipped, as the generated decoders skip them.
func eachBytesField(b []byte, last protowire.Number, f func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if num < 1 || num > last {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("field %d has wire type %d, not bytes", num, typ)
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, v); err != nil {
			return err
		}
	}
	return nil
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
