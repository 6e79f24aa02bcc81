package validation

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Role validates a Role's rules; a namespaced Role cannot grant non-resource URLs.
func Role(r *rbacv1.Role) field.ErrorList {
	errs := objectMeta(&r.ObjectMeta, true, pathSegmentName)
	return append(errs, policyRules(r.Rules, false, field.NewPath("rules"))...)
}

// ClusterRole validates a ClusterRole's rules.
func ClusterRole(r *rbacv1.ClusterRole) field.ErrorList {
	errs := objectMeta(&r.ObjectMeta, false, pathSegmentName)
	if r.AggregationRule != nil {
		errs = append(errs, field.Forbidden(field.NewPath("aggregationRule"), "aggregated ClusterRoles are not supported"))
	}
	return append(errs, policyRules(r.Rules, true, field.NewPath("rules"))...)
}

// RoleBinding validates a RoleBinding: a roleRef to a Role or ClusterRole, and its subjects.
func RoleBinding(b *rbacv1.RoleBinding) field.ErrorList {
	errs := objectMeta(&b.ObjectMeta, true, pathSegmentName)
	errs = append(errs, roleRef(b.RoleRef, "Role", "ClusterRole")...)
	return append(errs, subjects(b.Subjects, true)...)
}

// ClusterRoleBinding validates a ClusterRoleBinding: a roleRef to a ClusterRole, and its subjects.
func ClusterRoleBinding(b *rbacv1.ClusterRoleBinding) field.ErrorList {
	errs := objectMeta(&b.ObjectMeta, false, pathSegmentName)
	errs = append(errs, roleRef(b.RoleRef, "ClusterRole")...)
	return append(errs, subjects(b.Subjects, false)...)
}

func policyRules(rules []rbacv1.PolicyRule, cluster bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range rules {
		rp := p.Index(i)
		if len(r.Verbs) == 0 {
			errs = append(errs, field.Required(rp.Child("verbs"), "verbs must contain at least one value"))
		}
		if len(r.NonResourceURLs) > 0 {
			if !cluster {
				errs = append(errs, field.Invalid(rp.Child("nonResourceURLs"), r.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(r.APIGroups) > 0 || len(r.Resources) > 0 || len(r.ResourceNames) > 0 {
				errs = append(errs, field.Invalid(rp.Child("nonResourceURLs"), r.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			continue
		}
		if len(r.APIGroups) == 0 {
			errs = append(errs, field.Required(rp.Child("apiGroups"), "resource rules must supply at least one api group"))
		}
		if len(r.Resources) == 0 {
			errs = append(errs, field.Required(rp.Child("resources"), "resource rules must supply at least one resource"))
		}
	}
	return errs
}

func roleRef(r rbacv1.RoleRef, kinds ...string) field.ErrorList {
	p := field.NewPath("roleRef")
	errs := oneOf(r.APIGroup, p.Child("apiGroup"), rbacv1.GroupName)
	errs = append(errs, oneOf(r.Kind, p.Child("kind"), kinds...)...)
	if r.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		errs = append(errs, messages(p.Child("name"), r.Name, pathSegmentName(r.Name, false))...)
	}
	return errs
}

func subjects(subs []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("subjects")
	for i, s := range subs {
		sp := p.Index(i)
		if s.Name == "" {
			errs = append(errs, field.Required(sp.Child("name"), ""))
		}
		switch s.Kind {
		case rbacv1.UserKind, rbacv1.GroupKind:
			errs = append(errs, oneOf(s.APIGroup, sp.Child("apiGroup"), rbacv1.GroupName)...)
		case rbacv1.ServiceAccountKind:
			if s.APIGroup != "" {
				errs = append(errs, field.NotSupported(sp.Child("apiGroup"), s.APIGroup, []string{""}))
			}
			if s.Name != "" {
				errs = append(errs, dnsSubdomain(s.Name, sp.Child("name"))...)
			}
			if !namespaced && s.Namespace == "" {
				errs = append(errs, field.Required(sp.Child("namespace"), ""))
			}
		default:
			errs = append(errs, oneOf(s.Kind, sp.Child("kind"), rbacv1.UserKind, rbacv1.GroupKind, rbacv1.ServiceAccountKind)...)
		}
	}
	return errs
}

// roleRef cannot change: a binding is deleted and recreated to point elsewhere, as in Kubernetes.
func roleRefUpdate(n, o rbacv1.RoleRef) field.ErrorList {
	return immutable(n, o, field.NewPath("roleRef"))
}
