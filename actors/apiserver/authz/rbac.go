package authz

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bus/statelog"
)

// RBAC authorizes from the Roles, ClusterRoles and bindings in the state log. Members of
// system:masters may do anything, whatever the bindings say.
type RBAC struct {
	roles, clusterRoles, roleBindings, clusterRoleBindings *informer.Informer
}

// NewRBAC mirrors the RBAC objects of log; Run keeps the mirror current.
func NewRBAC(log *statelog.Log) *RBAC {
	const g = rbacv1.GroupName
	return &RBAC{
		roles:               informer.For(log, g, "roles"),
		clusterRoles:        informer.For(log, g, "clusterroles"),
		roleBindings:        informer.For(log, g, "rolebindings"),
		clusterRoleBindings: informer.For(log, g, "clusterrolebindings"),
	}
}

func (r *RBAC) informers() []*informer.Informer {
	return []*informer.Informer{r.roles, r.clusterRoles, r.roleBindings, r.clusterRoleBindings}
}

// Run watches the log until ctx ends.
func (r *RBAC) Run(ctx context.Context) {
	for _, inf := range r.informers() {
		go func() { _ = inf.Run(ctx) }()
	}
}

// WaitForSync blocks until every mirror holds its first snapshot, or ctx ends.
func (r *RBAC) WaitForSync(ctx context.Context) bool {
	for _, inf := range r.informers() {
		if !inf.WaitForSync(ctx) {
			return false
		}
	}
	return true
}

// Authorize allows a when a rule bound to the user grants it.
func (r *RBAC) Authorize(a Attributes) (bool, string) {
	if a.User.InGroup(authn.GroupMasters) {
		return true, ""
	}
	for _, o := range r.clusterRoleBindings.List(nil) {
		b := o.(*rbacv1.ClusterRoleBinding)
		if b.RoleRef.Kind == "ClusterRole" && boundTo(a.User, b.Subjects, "") && r.grants(r.clusterRoleRules(b.RoleRef.Name), a) {
			return true, ""
		}
	}
	if a.Namespace == "" || !a.ResourceRequest {
		return false, ""
	}
	for _, o := range r.roleBindings.List(func(o runtime.Object) bool { return o.(*rbacv1.RoleBinding).Namespace == a.Namespace }) {
		b := o.(*rbacv1.RoleBinding)
		if !boundTo(a.User, b.Subjects, b.Namespace) {
			continue
		}
		var rules []rbacv1.PolicyRule
		switch b.RoleRef.Kind {
		case "ClusterRole":
			rules = r.clusterRoleRules(b.RoleRef.Name)
		case "Role":
			if o, ok := r.roles.Get(b.Namespace, b.RoleRef.Name); ok {
				rules = o.(*rbacv1.Role).Rules
			}
		}
		if r.grants(rules, a) {
			return true, ""
		}
	}
	return false, ""
}

func (r *RBAC) clusterRoleRules(name string) []rbacv1.PolicyRule {
	if o, ok := r.clusterRoles.Get("", name); ok {
		return o.(*rbacv1.ClusterRole).Rules
	}
	return nil
}

func (r *RBAC) grants(rules []rbacv1.PolicyRule, a Attributes) bool {
	for _, rule := range rules {
		if RuleAllows(rule, a) {
			return true
		}
	}
	return false
}

// RuleAllows reports whether one policy rule covers a.
func RuleAllows(rule rbacv1.PolicyRule, a Attributes) bool {
	if !contains(rule.Verbs, a.Verb) {
		return false
	}
	if !a.ResourceRequest {
		return pathMatches(rule.NonResourceURLs, a.Path)
	}
	if !contains(rule.APIGroups, a.APIGroup) || !resourceMatches(rule.Resources, a.Resource, a.Subresource) {
		return false
	}
	return len(rule.ResourceNames) == 0 || (a.Name != "" && containsExact(rule.ResourceNames, a.Name))
}

func containsExact(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// boundTo reports whether one of subjects is u. ns is the binding's namespace, the default of
// its ServiceAccount subjects.
func boundTo(u authn.User, subjects []rbacv1.Subject, ns string) bool {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if s.Name == u.Name {
				return true
			}
		case rbacv1.GroupKind:
			if u.InGroup(s.Name) {
				return true
			}
		case rbacv1.ServiceAccountKind:
			sns := s.Namespace
			if sns == "" {
				sns = ns
			}
			if u.Name == "system:serviceaccount:"+sns+":"+s.Name {
				return true
			}
		}
	}
	return false
}
