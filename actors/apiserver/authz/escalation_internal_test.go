package authz

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// The missing rules are listed as Kubernetes lists them: verbs of one resource merged, names
// and paths kept apart, sorted.
func TestDescribeMissingRules(t *testing.T) {
	held := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}
	asked := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "secrets"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}, ResourceNames: []string{"admin"}},
		{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
	}
	covered, missing := validation.Covers(held, asked)
	if covered {
		t.Fatal("covered")
	}
	want := []string{
		`{APIGroups:[""], Resources:["pods"], Verbs:["list"]}`,
		`{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}`,
		`{APIGroups:["rbac.authorization.k8s.io"], Resources:["clusterroles"], ResourceNames:["admin"], Verbs:["bind"]}`,
		`{NonResourceURLs:["/metrics"], Verbs:["get"]}`,
	}
	if got := describe(missing); !slices.Equal(got, want) {
		t.Errorf("describe:\n%q\nwant\n%q", got, want)
	}
}
