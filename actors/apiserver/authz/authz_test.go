package authz

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/schemas"
)

func res(verb, group, resource, sub, ns, name string) Attributes {
	return Attributes{User: authn.User{Name: "u"}, Verb: verb, ResourceRequest: true, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
}

func TestRuleAllows(t *testing.T) {
	podsRead := rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	anyScale := rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*/scale"}}
	named := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"cfg"}}
	paths := rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/apis/*", "/version"}}
	for _, c := range []struct {
		rule rbacv1.PolicyRule
		a    Attributes
		want bool
	}{
		{podsRead, res("get", "", "pods", "", "x", "p"), true},
		{podsRead, res("list", "", "pods", "", "x", ""), true},
		{podsRead, res("watch", "", "pods", "", "x", ""), false},
		{podsRead, res("get", "", "pods", "log", "x", "p"), false}, // a subresource needs its own grant
		{podsRead, res("get", "apps", "pods", "", "x", "p"), false},
		{anyScale, res("update", "apps", "deployments", "scale", "x", "d"), true},
		{anyScale, res("update", "apps", "deployments", "", "x", "d"), false},
		{named, res("get", "", "configmaps", "", "x", "cfg"), true},
		{named, res("get", "", "configmaps", "", "x", "other"), false},
		{paths, Attributes{Verb: "get", Path: "/apis/apps/v1"}, true},
		{paths, Attributes{Verb: "get", Path: "/version"}, true},
		{paths, Attributes{Verb: "get", Path: "/metrics"}, false},
		{paths, Attributes{Verb: "post", Path: "/version"}, false},
		{podsRead, Attributes{Verb: "get", Path: "/api/v1/pods"}, false}, // resource rules never grant paths
	} {
		if got := RuleAllows(c.rule, c.a); got != c.want {
			t.Errorf("%v allows %+v = %v, want %v", c.rule, c.a, got, c.want)
		}
	}
}

func TestBoundTo(t *testing.T) {
	u := authn.User{Name: "system:serviceaccount:x:builder", Groups: []string{"dev"}}
	for _, c := range []struct {
		s    rbacv1.Subject
		ns   string
		want bool
	}{
		{rbacv1.Subject{Kind: "ServiceAccount", Name: "builder"}, "x", true},
		{rbacv1.Subject{Kind: "ServiceAccount", Name: "builder"}, "y", false},
		{rbacv1.Subject{Kind: "ServiceAccount", Name: "builder", Namespace: "x"}, "", true},
		{rbacv1.Subject{Kind: "Group", Name: "dev"}, "", true},
		{rbacv1.Subject{Kind: "User", Name: "dev"}, "", false},
	} {
		if got := boundTo(u, []rbacv1.Subject{c.s}, c.ns); got != c.want {
			t.Errorf("%+v in %q: %v, want %v", c.s, c.ns, got, c.want)
		}
	}
}

func TestForbiddenMessages(t *testing.T) {
	bob := authn.User{Name: "bob"}
	for _, c := range []struct {
		a    Attributes
		want string
	}{
		{Attributes{User: bob, Verb: "list", ResourceRequest: true, Resource: "pods", Namespace: "x"},
			`pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "x"`},
		{Attributes{User: bob, Verb: "get", ResourceRequest: true, APIGroup: "apps", Resource: "deployments", Subresource: "scale", Namespace: "x", Name: "d"},
			`deployments.apps "d" is forbidden: User "bob" cannot get resource "deployments/scale" in API group "apps" in the namespace "x"`},
		{Attributes{User: bob, Verb: "list", ResourceRequest: true, Resource: "nodes"},
			`nodes is forbidden: User "bob" cannot list resource "nodes" in API group "" at the cluster scope`},
		{Attributes{User: bob, Verb: "get", Path: "/metrics"}, `forbidden: User "bob" cannot get path "/metrics"`},
	} {
		if got := Forbidden(c.a, "").Error(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

// TestBootstrapPolicyIsValid: every bootstrap object passes the validation users' objects get.
func TestBootstrapPolicyIsValid(t *testing.T) {
	for _, obj := range BootstrapPolicy() {
		if _, ok := schemas.ByGVK(obj.GetObjectKind().GroupVersionKind()); !ok {
			t.Errorf("%T: unserved kind", obj)
		}
		schemas.Default(obj)
		if errs := schemas.Validate(obj); len(errs) > 0 {
			t.Errorf("%T: %v", obj, errs)
		}
	}
}

// Components in other processes send their spans to the span store as themselves.
func TestComponentsMayExportSpans(t *testing.T) {
	post := Attributes{Verb: "post", Path: "/v1/traces"}
	for _, o := range BootstrapPolicy() {
		role, ok := o.(*rbacv1.ClusterRole)
		if !ok {
			continue
		}
		allowed := false
		for _, r := range role.Rules {
			allowed = allowed || RuleAllows(r, post)
		}
		want := role.Name == "system:node" || role.Name == SchedulerUser || role.Name == ControllerManagerUser || role.Name == "cluster-admin"
		if allowed != want {
			t.Errorf("ClusterRole %s allows POST /v1/traces = %v, want %v", role.Name, allowed, want)
		}
	}
}
