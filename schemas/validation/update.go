package validation

import (
	"bytes"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// podUpdate allows only what Kubernetes lets a running Pod change: container images, a shorter
// (or first) activeDeadlineSeconds, added tolerations, and the node once (for binding).
func podUpdate(n, o *corev1.Pod) field.ErrorList {
	errs := metaUpdate(&n.ObjectMeta, &o.ObjectMeta)
	if o.Spec.NodeName != "" && n.Spec.NodeName != o.Spec.NodeName {
		errs = append(errs, field.Invalid(specPath.Child("nodeName"), n.Spec.NodeName, "field is immutable once set"))
	}
	if o.Spec.ActiveDeadlineSeconds != nil {
		ap := specPath.Child("activeDeadlineSeconds")
		switch {
		case n.Spec.ActiveDeadlineSeconds == nil:
			errs = append(errs, field.Invalid(ap, n.Spec.ActiveDeadlineSeconds, "must not update from a positive integer to nil value"))
		case *n.Spec.ActiveDeadlineSeconds > *o.Spec.ActiveDeadlineSeconds:
			errs = append(errs, field.Invalid(ap, *n.Spec.ActiveDeadlineSeconds, "must be less than or equal to previous value"))
		}
	}
	for i, t := range o.Spec.Tolerations {
		if !hasToleration(n.Spec.Tolerations, t) {
			errs = append(errs, field.Forbidden(specPath.Child("tolerations").Index(i), "existing toleration can not be modified except its tolerationSeconds"))
		}
	}
	// Compare the rest with the mutable fields taken from the new spec: a shallow copy of the
	// old spec does (every pod status write comes here: no deep copy), with its own copies of
	// the container lists whose images it sets.
	mutable := o.Spec
	mutable.NodeName = n.Spec.NodeName
	mutable.ActiveDeadlineSeconds = n.Spec.ActiveDeadlineSeconds
	mutable.Tolerations = n.Spec.Tolerations
	mutable.SchedulingGates = n.Spec.SchedulingGates
	mutable.Containers = withImages(o.Spec.Containers, n.Spec.Containers)
	mutable.InitContainers = withImages(o.Spec.InitContainers, n.Spec.InitContainers)
	if !semanticallyEqual(&mutable, &n.Spec) {
		errs = append(errs, field.Forbidden(specPath, "pod updates may not change fields other than `spec.containers[*].image`, "+
			"`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations) "+
			"and `spec.nodeName` (only when unset)"))
	}
	return errs
}

// withImages is old with the images of next, when both list as many containers: old itself
// when no image changed (every status write: nothing to copy), else a copy.
func withImages(old, next []corev1.Container) []corev1.Container {
	if len(old) != len(next) || slices.EqualFunc(old, next, func(o, n corev1.Container) bool { return o.Image == n.Image }) {
		return old
	}
	out := slices.Clone(old)
	for i := range out {
		out[i].Image = next[i].Image
	}
	return out
}

// hasToleration reports whether t is still in ts; only its tolerationSeconds may have shrunk.
func hasToleration(ts []corev1.Toleration, t corev1.Toleration) bool {
	for _, c := range ts {
		if c.Key != t.Key || c.Operator != t.Operator || c.Value != t.Value || c.Effect != t.Effect {
			continue
		}
		switch {
		case t.TolerationSeconds == nil && c.TolerationSeconds == nil:
			return true
		case t.TolerationSeconds != nil && c.TolerationSeconds != nil && *c.TolerationSeconds <= *t.TolerationSeconds:
			return true
		}
	}
	return false
}

// nodeUpdate lets the pod CIDR be set once.
func nodeUpdate(n, o *corev1.Node) field.ErrorList {
	errs := metaUpdate(&n.ObjectMeta, &o.ObjectMeta)
	if o.Spec.PodCIDR != "" && n.Spec.PodCIDR != o.Spec.PodCIDR {
		errs = append(errs, field.Forbidden(specPath.Child("podCIDR"), "node updates may not change podCIDR except from \"\" to valid"))
	}
	return errs
}

func configMapUpdate(n, o *corev1.ConfigMap) field.ErrorList {
	errs := metaUpdate(&n.ObjectMeta, &o.ObjectMeta)
	if o.Immutable == nil || !*o.Immutable {
		return errs
	}
	if n.Immutable == nil || !*n.Immutable {
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
	}
	if !apiequality.Semantic.DeepEqual(n.Data, o.Data) {
		errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
	}
	if !apiequality.Semantic.DeepEqual(n.BinaryData, o.BinaryData) {
		errs = append(errs, field.Forbidden(field.NewPath("binaryData"), "field is immutable when `immutable` is set"))
	}
	return errs
}

func secretUpdate(n, o *corev1.Secret) field.ErrorList {
	errs := metaUpdate(&n.ObjectMeta, &o.ObjectMeta)
	errs = append(errs, immutable(n.Type, o.Type, field.NewPath("type"))...)
	if o.Immutable == nil || !*o.Immutable {
		return errs
	}
	if n.Immutable == nil || !*n.Immutable {
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
	}
	same := len(n.Data) == len(o.Data)
	for k, v := range o.Data {
		same = same && bytes.Equal(n.Data[k], v)
	}
	if !same {
		errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
	}
	return errs
}
