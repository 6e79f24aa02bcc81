package review

import (
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateAttributes checks that exactly one of the resource and non-resource attributes is set,
// with Kubernetes' messages.
func ValidateAttributes(spec *field.Path, res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) field.ErrorList {
	switch {
	case res == nil && nonRes == nil:
		return field.ErrorList{field.Invalid(spec.Child("resourceAttributes"), nil, "exactly one of nonResourceAttributes or resourceAttributes must be specified")}
	case res != nil && nonRes != nil:
		return field.ErrorList{field.Invalid(spec.Child("resourceAttributes"), res, "cannot be specified in combination with nonResourceAttributes")}
	}
	return nil
}

// ValidateSubjectAccessReview checks a SubjectAccessReview's spec: the attributes, and a user
// or a group to ask about.
func ValidateSubjectAccessReview(spec authorizationv1.SubjectAccessReviewSpec) field.ErrorList {
	p := field.NewPath("spec")
	errs := ValidateAttributes(p, spec.ResourceAttributes, spec.NonResourceAttributes)
	if spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(p.Child("user"), spec.User, "at least one of user or group must be specified"))
	}
	return errs
}

// ValidateLocalSubjectAccessReview adds a LocalSubjectAccessReview's rules: resource
// attributes only, in the review's own namespace.
func ValidateLocalSubjectAccessReview(namespace string, spec authorizationv1.SubjectAccessReviewSpec) field.ErrorList {
	p := field.NewPath("spec")
	if spec.NonResourceAttributes != nil {
		return field.ErrorList{field.Invalid(p.Child("nonResourceAttributes"), spec.NonResourceAttributes, "disallowed on this kind of request")}
	}
	errs := ValidateSubjectAccessReview(spec)
	if spec.ResourceAttributes != nil && spec.ResourceAttributes.Namespace != namespace {
		errs = append(errs, field.Invalid(p.Child("resourceAttributes", "namespace"), spec.ResourceAttributes.Namespace, "must match metadata.namespace"))
	}
	return errs
}
