package validation

import (
	"bytes"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// generated is a k8s.io/api type with its generated protobuf marshaller.
type generated interface{ Marshal() ([]byte, error) }

// semanticallyEqual is apiequality.Semantic.DeepEqual for two values of a generated type, tried
// first on their protobuf encodings. The generated marshallers are deterministic (map keys
// sorted), so equal bytes are equal values, and the common case of an update that leaves an
// immutable part alone (every status write, whose spec is the stored one) costs two marshals
// instead of a reflective walk of both. Different bytes may still be semantically equal (a
// quantity sent as "1000m" and stored as "1"): those are decided by the walk.
func semanticallyEqual[T generated](a, b T) bool {
	ab, errA := a.Marshal()
	bb, errB := b.Marshal()
	if errA == nil && errB == nil && bytes.Equal(ab, bb) {
		return true
	}
	return apiequality.Semantic.DeepEqual(a, b)
}
