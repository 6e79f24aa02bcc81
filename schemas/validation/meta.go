package validation

import (
	"fmt"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var metadataPath = field.NewPath("metadata")

// objectMeta validates metadata of a namespaced (or cluster-scoped) object with the name rule
// of its kind.
func objectMeta(m *metav1.ObjectMeta, namespaced bool, name apivalidation.ValidateNameFunc) field.ErrorList {
	return apivalidation.ValidateObjectMeta(m, namespaced, name, metadataPath)
}

// pathSegmentName allows any name usable in a URL path (Events use it).
func pathSegmentName(name string, prefix bool) []string {
	return path.ValidatePathSegmentName(name, prefix)
}

func metaUpdate(n, o *metav1.ObjectMeta) field.ErrorList {
	return apivalidation.ValidateObjectMetaUpdate(n, o, metadataPath)
}

func immutable(n, o any, p *field.Path) field.ErrorList {
	return apivalidation.ValidateImmutableField(n, o, p)
}

func nonNegative(v int64, p *field.Path) field.ErrorList {
	return apivalidation.ValidateNonnegativeField(v, p)
}

func positive(v int64, p *field.Path) field.ErrorList {
	if v <= 0 {
		return field.ErrorList{field.Invalid(p, v, "must be greater than 0")}
	}
	return nil
}

func dnsLabel(v string, p *field.Path) field.ErrorList {
	return messages(p, v, validation.IsDNS1123Label(v))
}

func dnsSubdomain(v string, p *field.Path) field.ErrorList {
	return messages(p, v, validation.IsDNS1123Subdomain(v))
}

func messages(p *field.Path, v any, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, m := range msgs {
		errs = append(errs, field.Invalid(p, v, m))
	}
	return errs
}

func labelMap(l map[string]string, p *field.Path) field.ErrorList {
	return metav1validation.ValidateLabels(l, p)
}

// selector validates a required label selector; empty ones select everything and are refused
// for workloads, as Kubernetes does.
func selector(s *metav1.LabelSelector, p *field.Path, what string) field.ErrorList {
	if s == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	errs := metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, p)
	if len(s.MatchLabels)+len(s.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(p, s, "empty selector is invalid for "+what))
	}
	return errs
}

// portNumOrName checks an IntOrString that names a container port by number or by name.
func portNumOrName(port intstr.IntOrString, p *field.Path) field.ErrorList {
	switch {
	case port.Type == intstr.Int && port.IntVal == 0, port.Type == intstr.String && port.StrVal == "":
		return field.ErrorList{field.Required(p, "")}
	case port.Type == intstr.Int:
		return messages(p, port.IntVal, validation.IsValidPortNum(int(port.IntVal)))
	}
	return messages(p, port.StrVal, validation.IsValidPortName(port.StrVal))
}

// intOrPercent checks a non-negative count or a percentage ("25%"); percentages above 100 are
// refused when max100 is set.
func intOrPercent(v *intstr.IntOrString, p *field.Path, max100 bool) field.ErrorList {
	if v == nil {
		return nil
	}
	if v.Type == intstr.Int {
		return nonNegative(int64(v.IntVal), p)
	}
	if msgs := validation.IsValidPercent(v.StrVal); len(msgs) > 0 {
		return messages(p, v.StrVal, msgs)
	}
	var n int
	if _, err := fmt.Sscanf(strings.TrimSuffix(v.StrVal, "%"), "%d", &n); err != nil {
		return field.ErrorList{field.Invalid(p, v.StrVal, "must be an integer or a percentage")}
	}
	if max100 && n > 100 {
		return field.ErrorList{field.Invalid(p, v.StrVal, "must not be greater than 100%")}
	}
	return nil
}

// isZero reports whether an IntOrString is 0 or "0%".
func isZero(v *intstr.IntOrString) bool {
	if v == nil {
		return false
	}
	if v.Type == intstr.Int {
		return v.IntVal == 0
	}
	return v.StrVal == "0%"
}

func oneOf[T ~string](v T, p *field.Path, allowed ...T) field.ErrorList {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	vals := make([]string, len(allowed))
	for i, a := range allowed {
		vals[i] = string(a)
	}
	if v == "" {
		return field.ErrorList{field.Required(p, "supported values: "+strings.Join(quote(vals), ", "))}
	}
	return field.ErrorList{field.NotSupported(p, v, vals)}
}

func quote(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

func labelKey(k string, p *field.Path) field.ErrorList {
	return metav1validation.ValidateLabelName(k, p)
}

// optionalField is a field that may be refused when set (see forbidSet).
type optionalField struct {
	name string
	set  bool
}

// forbidSet refuses, with msg, each of fields (children of p) that is set: what Skiff does
// not implement is refused, never accepted and ignored.
func forbidSet(p *field.Path, msg string, fields ...optionalField) field.ErrorList {
	var errs field.ErrorList
	for _, f := range fields {
		if f.set {
			errs = append(errs, field.Forbidden(p.Child(f.name), msg))
		}
	}
	return errs
}
