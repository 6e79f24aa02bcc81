package apiserver

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
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

// acceptClause is one media range of an Accept header.
type acceptClause struct {
	mediaType string
	as        string // the shape asked for (as=Table), "" for the object itself
	q         float64
}

// acceptClauses parses Accept, skipping malformed ranges as kube-apiserver's negotiation does.
func acceptClauses(accept string) []acceptClause {
	var out []acceptClause
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if q, err = strconv.ParseFloat(v, 64); err != nil {
				continue
			}
		}
		out = append(out, acceptClause{mediaType: mt, as: params["as"], q: q})
	}
	return out
}

// prefersProtobuf reports whether Accept ranks protobuf above every other type (by q, then
// order), as client-go's "application/vnd.kubernetes.protobuf, */*" does. A protobuf type
// asking for another shape (as=Table) does not count: tables are served as JSON only.
func prefersProtobuf(accept string) bool {
	best, bestQ := false, -1.0
	for _, c := range acceptClauses(accept) {
		if c.q > bestQ {
			best, bestQ = c.mediaType == schemas.ContentTypeProtobuf && c.as == "", c.q
		}
	}
	return best && bestQ > 0
}

// answersProtobuf reports whether an answer of kind k (an object, a list or a watch stream)
// is protobuf: Accept prefers it and the kind has it, else the answer is JSON.
func answersProtobuf(r *http.Request, k *schemas.Kind) bool {
	return prefersProtobuf(r.Header.Get("Accept")) && schemas.HasProtobuf(k)
}

// notAcceptable is kube-apiserver's 406 for a request whose Accept takes nothing but protobuf
// of a kind without a protobuf form (a custom resource), refused before anything is done. An
// Accept that also takes JSON (client-go's "application/vnd.kubernetes.protobuf,
// application/json", or "*/*") gets JSON; one asking for another shape (as=Table) is left to
// that shape's handling.
func notAcceptable(r *http.Request, k *schemas.Kind, info requestInfo) error {
	if schemas.HasProtobuf(k) || info.subresource == "scale" {
		return nil // a custom resource's scale is an autoscaling/v1 Scale, which has protobuf
	}
	clauses := acceptClauses(r.Header.Get("Accept"))
	if len(clauses) == 0 {
		return nil
	}
	for _, c := range clauses {
		if c.q > 0 && (c.mediaType != schemas.ContentTypeProtobuf || c.as != "") {
			return nil
		}
	}
	return negotiation.NewNotAcceptableError([]string{"application/json", "application/yaml"})
}
