package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/skiff-sh/skiff/schemas"
)

// Kubernetes' own components send and accept built-in kinds as protobuf. A body holding a whole
// object of the request's kind (create, update, status update) is decoded natively; any other
// body (binding, eviction, delete options, scale, reviews) is turned into JSON once, at the door.
var protobufSerializer = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

func isProtobuf(contentType string) bool {
	return strings.HasPrefix(strings.TrimSpace(contentType), schemas.ContentTypeProtobuf)
}

func protobufToJSON(body []byte) ([]byte, error) {
	obj, _, err := protobufSerializer.Decode(body, nil, nil)
	if err != nil {
		return nil, badRequest("protobuf body: %v", err)
	}
	return json.Marshal(obj)
}

// protobufBody prepares a write's body sent with contentType: native reports a protobuf body of
// a whole object, left as it is for decodeBody. A kind without protobuf (a custom resource)
// refuses such a body with 415, as kube-apiserver does.
func protobufBody(k *schemas.Kind, info requestInfo, contentType string, body []byte) (out []byte, native bool, err error) {
	if !isProtobuf(contentType) || len(body) == 0 {
		return body, false, nil
	}
	if !wholeObject(info) {
		out, err = protobufToJSON(body)
		return out, false, err
	}
	if !schemas.HasProtobuf(k) {
		return nil, false, unsupportedMediaType(contentType, "application/json", "application/yaml")
	}
	return body, true, nil
}

// wholeObject: the request's body is an object of the kind the URL names.
func wholeObject(info requestInfo) bool {
	switch info.verb {
	case "create":
		return info.subresource == ""
	case "update":
		return info.subresource == "" || info.subresource == "status"
	}
	return false
}

// unsupportedMediaType is kube-apiserver's 415 for a body in a format the request does not take.
func unsupportedMediaType(ct string, accepted ...string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format %q - accepted media types include: %s", ct, strings.Join(accepted, ", ")),
	}}
}
