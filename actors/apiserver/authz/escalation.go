package authz

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-helpers/auth/rbac/validation"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
)

// EscalationChecker is implemented by authorizers that can refuse RBAC writes granting more
// than the writer holds (the apiserver runs it as built-in admission on RBAC kinds).
type EscalationChecker interface {
	// CheckEscalation returns nil when u may write obj (old: the stored object on update, else
	// nil); otherwise an error saying what u does not hold, or an API status error.
	CheckEscalation(u authn.User, verb string, obj, old runtime.Object) error
}

// CheckEscalation is kube-apiserver's RBAC escalation prevention: a Role or ClusterRole may
// be written only by a user who holds every rule in it, or may "escalate" that resource; a
// binding only by a user who holds every rule of the role it refers to (in the binding's
// namespace), or may "bind" that role. system:masters is exempt. Without this, the right to
// create RoleBindings in a namespace is the right to become its admin.
func (r *RBAC) CheckEscalation(u authn.User, verb string, obj, old runtime.Object) error {
	if verb != "create" && verb != "update" && verb != "patch" {
		return nil
	}
	if u.InGroup(authn.GroupMasters) {
		return nil
	}
	switch o := obj.(type) {
	case *rbacv1.Role:
		if prev, ok := old.(*rbacv1.Role); ok && apiequality.Semantic.DeepEqual(prev.Rules, o.Rules) {
			return nil // labels, owners, finalizers: nothing new is granted
		}
		return r.checkRole(u, verb, "roles", o.Namespace, o.Name, o.Rules)
	case *rbacv1.ClusterRole:
		if prev, ok := old.(*rbacv1.ClusterRole); ok && apiequality.Semantic.DeepEqual(prev.Rules, o.Rules) {
			return nil
		}
		return r.checkRole(u, verb, "clusterroles", "", o.Name, o.Rules)
	case *rbacv1.RoleBinding:
		if prev, ok := old.(*rbacv1.RoleBinding); ok && sameGrant(prev.RoleRef, o.RoleRef, prev.Subjects, o.Subjects) {
			return nil
		}
		return r.checkBinding(u, o.Namespace, o.RoleRef)
	case *rbacv1.ClusterRoleBinding:
		if prev, ok := old.(*rbacv1.ClusterRoleBinding); ok && sameGrant(prev.RoleRef, o.RoleRef, prev.Subjects, o.Subjects) {
			return nil
		}
		return r.checkBinding(u, "", o.RoleRef)
	}
	return nil
}

func sameGrant(oldRef, newRef rbacv1.RoleRef, oldSubjects, newSubjects []rbacv1.Subject) bool {
	return oldRef == newRef && apiequality.Semantic.DeepEqual(oldSubjects, newSubjects)
}

func (r *RBAC) checkRole(u authn.User, verb, resource, ns, name string, rules []rbacv1.PolicyRule) error {
	esc := Attributes{User: u, Verb: "escalate", ResourceRequest: true, APIGroup: rbacv1.GroupName, Resource: resource, Namespace: ns}
	if verb != "create" {
		esc.Name = name // as in Kubernetes, where a create's request names no object
	}
	if ok, _ := r.Authorize(esc); ok {
		return nil
	}
	return r.confirmNoEscalation(u, ns, rules)
}

func (r *RBAC) checkBinding(u authn.User, ns string, ref rbacv1.RoleRef) error {
	bind := Attributes{User: u, Verb: "bind", ResourceRequest: true, APIGroup: ref.APIGroup, Namespace: ns, Name: ref.Name}
	switch ref.Kind {
	case "ClusterRole":
		bind.Resource = "clusterroles"
	case "Role":
		bind.Resource = "roles"
	default:
		return fmt.Errorf("roleRef.kind %q: only Role and ClusterRole can be bound", ref.Kind)
	}
	// May bind this role here: it need not exist yet, as in Kubernetes.
	if ok, _ := r.Authorize(bind); ok {
		return nil
	}
	var rules []rbacv1.PolicyRule
	if ref.Kind == "ClusterRole" {
		o, ok := r.clusterRoles.Get("", ref.Name)
		if !ok {
			return apierrors.NewNotFound(rbacv1.Resource("clusterroles"), ref.Name)
		}
		rules = o.(*rbacv1.ClusterRole).Rules
	} else {
		o, ok := r.roles.Get(ns, ref.Name)
		if !ok {
			return apierrors.NewNotFound(rbacv1.Resource("roles"), ref.Name)
		}
		rules = o.(*rbacv1.Role).Rules
	}
	return r.confirmNoEscalation(u, ns, rules)
}

// confirmNoEscalation refuses rules that u does not hold in ns, with Kubernetes' message.
func (r *RBAC) confirmNoEscalation(u authn.User, ns string, rules []rbacv1.PolicyRule) error {
	covered, missing := validation.Covers(r.RulesFor(u, ns), rules)
	if covered {
		return nil
	}
	groups := u.Groups
	if groups == nil {
		groups = []string{}
	}
	return fmt.Errorf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s",
		u.Name, groups, strings.Join(describe(missing), "\n"))
}

// RulesFor lists the rules u holds in ns ("" = the cluster-wide ones only), as the
// authorizer sees them.
func (r *RBAC) RulesFor(u authn.User, ns string) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, o := range r.clusterRoleBindings.List(nil) {
		b := o.(*rbacv1.ClusterRoleBinding)
		if b.RoleRef.Kind == "ClusterRole" && boundTo(u, b.Subjects, "") {
			rules = append(rules, r.clusterRoleRules(b.RoleRef.Name)...)
		}
	}
	if ns == "" {
		return rules
	}
	for _, o := range r.roleBindings.List(func(o runtime.Object) bool { return o.(*rbacv1.RoleBinding).Namespace == ns }) {
		b := o.(*rbacv1.RoleBinding)
		if !boundTo(u, b.Subjects, b.Namespace) {
			continue
		}
		switch b.RoleRef.Kind {
		case "ClusterRole":
			rules = append(rules, r.clusterRoleRules(b.RoleRef.Name)...)
		case "Role":
			if o, ok := r.roles.Get(b.Namespace, b.RoleRef.Name); ok {
				rules = append(rules, o.(*rbacv1.Role).Rules...)
			}
		}
	}
	return rules
}

// describe compacts the one-verb rules Covers returns (verbs of one group, resource and name
// merged) and renders them as Kubernetes does, one line each, sorted.
func describe(missing []rbacv1.PolicyRule) []string {
	type key struct{ group, resource, name, url string }
	var order []key
	verbs := map[key][]string{}
	for _, m := range missing {
		var k key
		if len(m.NonResourceURLs) > 0 {
			k.url = m.NonResourceURLs[0]
		} else {
			k.group, k.resource = m.APIGroups[0], m.Resources[0]
			if len(m.ResourceNames) > 0 {
				k.name = m.ResourceNames[0]
			}
		}
		if _, seen := verbs[k]; !seen {
			order = append(order, k)
		}
		if !slices.Contains(verbs[k], m.Verbs[0]) {
			verbs[k] = append(verbs[k], m.Verbs[0])
		}
	}
	lines := make([]string, 0, len(order))
	for _, k := range order {
		var parts []string
		if k.url == "" {
			parts = append(parts, fmt.Sprintf("APIGroups:%q", []string{k.group}), fmt.Sprintf("Resources:%q", []string{k.resource}))
			if k.name != "" {
				parts = append(parts, fmt.Sprintf("ResourceNames:%q", []string{k.name}))
			}
		} else {
			parts = append(parts, fmt.Sprintf("NonResourceURLs:%q", []string{k.url}))
		}
		parts = append(parts, fmt.Sprintf("Verbs:%q", verbs[k]))
		lines = append(lines, "{"+strings.Join(parts, ", ")+"}")
	}
	slices.Sort(lines)
	return lines
}
