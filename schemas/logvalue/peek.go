package logvalue

import (
	"encoding/json"
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/schemas"
)

// Field numbers of the generated protobuf (k8s.io/api's protobuf struct tags): every
// top-level kind holds its metadata in field 1; a Pod its spec in 2, a PodSpec nodeName in 10.
const (
	metadataField protowire.Number = 1
	podSpecField  protowire.Number = 2
	nodeNameField protowire.Number = 10
)

// Meta is the metadata of a stored object of any built-in or custom kind, read without
// decoding the rest (its kind is not checked).
func Meta(value []byte) (*metav1.ObjectMeta, error) {
	if !schemas.IsProtobuf(value) {
		var stored struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(value, &stored); err != nil {
			return nil, err
		}
		return &stored.Metadata, nil
	}
	raw, err := unwrapAny(value)
	if err != nil {
		return nil, err
	}
	m := &metav1.ObjectMeta{}
	b, err := embedded(raw, metadataField)
	if err != nil {
		return nil, err
	}
	return m, m.Unmarshal(b)
}

// PodNodeName is spec.nodeName of a stored Pod, read without decoding the rest.
func PodNodeName(value []byte) (string, error) {
	if !schemas.IsProtobuf(value) {
		var stored struct {
			Spec struct {
				NodeName string `json:"nodeName"`
			} `json:"spec"`
		}
		err := json.Unmarshal(value, &stored)
		return stored.Spec.NodeName, err
	}
	raw, err := unwrapAny(value)
	if err != nil {
		return "", err
	}
	spec, err := embedded(raw, podSpecField)
	if err != nil {
		return "", err
	}
	name, err := scalar(spec, nodeNameField)
	return string(name), err
}

// unwrapAny is the object inside a protobuf value's envelope, whatever its kind.
func unwrapAny(value []byte) ([]byte, error) {
	raw, err := scalar(value[len(schemas.ProtobufMagic):], 2) // runtime.Unknown's raw
	if err != nil {
		return nil, errors.New("protobuf envelope: " + err.Error())
	}
	return raw, nil
}

// embedded is the embedded message field num of msg: every occurrence, concatenated, as
// protobuf decoding merges them (empty when absent).
func embedded(msg []byte, num protowire.Number) ([]byte, error) { return field(msg, num, true) }

// scalar is the length-delimited scalar field num of msg (a string, bytes): its last
// occurrence, as protobuf decoding takes it (empty when absent).
func scalar(msg []byte, num protowire.Number) ([]byte, error) { return field(msg, num, false) }

func field(msg []byte, num protowire.Number, merge bool) ([]byte, error) {
	var out []byte
	for len(msg) > 0 {
		n, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		msg = msg[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(msg)
			if l < 0 {
				return nil, protowire.ParseError(l)
			}
			if merge && out != nil {
				out = append(append([]byte(nil), out...), v...)
			} else {
				out = v
			}
			msg = msg[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, msg)
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		msg = msg[l:]
	}
	return out, nil
}
