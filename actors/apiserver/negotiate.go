package apiserver

import (
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"

	"github.com/skiff-sh/skiff/schemas"
)

// shape is what an answer holds: the object (list, watch events) itself, kubectl's table, or
// only the metadata (client-go's metadata client and informers, the garbage collector).
type shape uint8

const (
	shapeObject shape = iota
	shapeTable
	shapeMetadata     // as=PartialObjectMetadata: of one object, or of each watch event's
	shapeMetadataList // as=PartialObjectMetadataList: of a list
)

var shapesByName = map[string]shape{
	"Table":                     shapeTable,
	"PartialObjectMetadata":     shapeMetadata,
	"PartialObjectMetadataList": shapeMetadataList,
}

// answer is the negotiated form of a response.
type answer struct {
	shape    shape
	gv       schema.GroupVersion // the shape's meta.k8s.io version (v1 or v1beta1); unset for shapeObject
	protobuf bool
}

func (a answer) metadata() bool { return a.shape == shapeMetadata || a.shape == shapeMetadataList }

// acceptClause is one media range of an Accept header.
type acceptClause struct {
	mediaType string
	params    map[string]string
	q         float64
}

// acceptClauses parses Accept, best first (by q, then order), skipping malformed and q=0
// ranges as kube-apiserver's negotiation does.
func acceptClauses(accept string) []acceptClause {
	var out []acceptClause
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if q, err = strconv.ParseFloat(v, 64); err != nil || q <= 0 {
				continue
			}
		}
		out = append(out, acceptClause{mediaType: mt, params: params, q: q})
	}
	slices.SortStableFunc(out, func(a, b acceptClause) int {
		switch {
		case a.q > b.q:
			return -1
		case a.q < b.q:
			return 1
		}
		return 0
	})
	return out
}

// negotiate picks the best of Accept's ranges that Skiff can answer, as kube-apiserver does
// (client-go's "application/vnd.kubernetes.protobuf, */*" gets protobuf). hasProtobuf: the
// object has a protobuf form (not a custom resource). ok is false when no range can be
// answered; an empty Accept gets JSON.
func negotiate(accept string, hasProtobuf bool) (a answer, ok bool) {
	clauses := acceptClauses(accept)
	if len(clauses) == 0 {
		return answer{}, true
	}
	for _, c := range clauses {
		if a, ok := c.answer(hasProtobuf); ok {
			return a, true
		}
	}
	return answer{}, false
}

// answer is what c asks for, if Skiff serves it. A range naming a shape (as=) must give its
// group and version (g=meta.k8s.io, v=v1 or v1beta1); a table is JSON only, metadata is JSON
// or protobuf for every kind (the wrapper is a built-in type). Other media types than
// protobuf get JSON.
func (c acceptClause) answer(hasProtobuf bool) (answer, bool) {
	pb := c.mediaType == schemas.ContentTypeProtobuf
	as, asked := c.params["as"]
	if !asked {
		return answer{protobuf: pb}, !pb || hasProtobuf
	}
	sh, known := shapesByName[as]
	gv := schema.GroupVersion{Group: c.params["g"], Version: c.params["v"]}
	if !known || (gv != metav1.SchemeGroupVersion && gv != metav1beta1.SchemeGroupVersion) || (sh == shapeTable && pb) {
		return answer{}, false
	}
	return answer{shape: sh, gv: gv, protobuf: pb}, true
}

// answerFor negotiates the answer to r before anything is done: kube-apiserver's 406 when
// Accept takes nothing Skiff can answer (only protobuf of a custom resource, only a shape it
// does not serve), or asks for a list's metadata of one object or the reverse.
func answerFor(r *http.Request, k *schemas.Kind, info requestInfo) (answer, error) {
	// A custom resource's scale is an autoscaling/v1 Scale, which has protobuf.
	hasProtobuf := schemas.HasProtobuf(k) || info.subresource == "scale"
	a, ok := negotiate(r.Header.Get("Accept"), hasProtobuf)
	if !ok {
		accepted := []string{"application/json", "application/yaml"}
		if hasProtobuf {
			accepted = append(accepted, schemas.ContentTypeProtobuf)
		}
		return a, negotiation.NewNotAcceptableError(accepted)
	}
	listing := info.verb == "list" || info.verb == "deletecollection"
	switch {
	case a.shape == shapeMetadata && listing:
		return a, notAcceptableShape("you requested PartialObjectMetadata, but the requested object is a list")
	case a.shape == shapeMetadataList && !listing:
		return a, notAcceptableShape("you requested PartialObjectMetadataList, but the requested object is not a list")
	}
	return a, nil
}

func notAcceptableShape(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable, Message: msg,
	}}
}
