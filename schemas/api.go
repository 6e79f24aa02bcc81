package schemas

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/schemas/defaults"
	"github.com/skiff-sh/skiff/schemas/printers"
	"github.com/skiff-sh/skiff/schemas/validation"
)

// Default fills in what the Kubernetes apiserver sets when a client leaves it out (see package
// defaults). Idempotent.
func Default(obj runtime.Object) {
	if u, c := customOf(obj); u != nil {
		if c != nil {
			c.Default(u)
		}
		return
	}
	defaults.Default(obj)
}

// DefaultUpdate carries values the server assigned over from the stored object into an update
// that omits them (a Service's cluster IPs and node ports), as Kubernetes does, then defaults.
func DefaultUpdate(newObj, oldObj runtime.Object) {
	if u, _ := customOf(newObj); u != nil {
		Default(newObj)
		return
	}
	defaults.Update(newObj, oldObj)
}

// Validate checks a new object after Default (see package validation).
func Validate(obj runtime.Object) field.ErrorList {
	if u, c := customOf(obj); u != nil {
		if c == nil {
			return field.ErrorList{field.Invalid(field.NewPath("kind"), u.GetKind(), "is not served")}
		}
		return c.Validate(u)
	}
	return validation.Validate(obj)
}

// ValidateUpdate checks an update of oldObj to newObj, including the immutable fields.
func ValidateUpdate(newObj, oldObj runtime.Object) field.ErrorList {
	if u, c := customOf(newObj); u != nil {
		old, ok := oldObj.(*unstructured.Unstructured)
		if c == nil || !ok {
			return Validate(newObj)
		}
		return c.ValidateUpdate(u, old)
	}
	return validation.ValidateUpdate(newObj, oldObj)
}

// ValidateStatusUpdate checks a write of oldObj's status subresource that makes newObj: by
// the kind's status rules where it has them (a Pod's), else as ValidateUpdate.
func ValidateStatusUpdate(newObj, oldObj runtime.Object) field.ErrorList {
	if u, _ := customOf(newObj); u != nil {
		return ValidateUpdate(newObj, oldObj)
	}
	return validation.ValidateStatusUpdate(newObj, oldObj)
}

// Table renders objs of kind k as kubectl's server-side table; each row carries the object's
// JSON (with apiVersion and kind) in Object.Raw.
func Table(k *Kind, objs []runtime.Object, now time.Time) *metav1.Table {
	var t *metav1.Table
	switch {
	case k.Custom != nil:
		t = k.Custom.Table(objs, now)
	case k.StoredAs != nil:
		t = storedVersionTable(k, objs, now)
	default:
		t = printers.Table(k.Resource, objs, now)
	}
	for i := range t.Rows {
		row := &t.Rows[i]
		if raw, err := EncodeJSON(row.Object.Object); err == nil {
			row.Object = runtime.RawExtension{Raw: raw}
		}
	}
	return t
}

// HumanDuration renders an age the way kubectl does: "5s", "3m2s", "4h", "12d".
func HumanDuration(d time.Duration) string { return printers.HumanDuration(d) }

// storedVersionTable prints the objects of a version stored as another with that version's
// columns (kube prints the internal form of either), each row carrying the object as served.
func storedVersionTable(k *Kind, objs []runtime.Object, now time.Time) *metav1.Table {
	stored := make([]runtime.Object, len(objs))
	for i, o := range objs {
		var err error
		if stored[i], err = k.StoredAs.ToStored(o); err != nil {
			stored[i] = o // printed as NAME AGE
		}
	}
	t := printers.Table(k.Resource, stored, now)
	for i := range t.Rows {
		t.Rows[i].Object = runtime.RawExtension{Object: objs[i]}
	}
	return t
}
