package validation_test

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas/validation"
)

func TestRBACRules(t *testing.T) {
	ref := func(kind, name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	}
	cluster := metav1.ObjectMeta{Name: "system:thing"} // colons are fine in RBAC names
	podRule := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	for _, c := range []struct {
		name string
		obj  runtime.Object
		path string
		want string
	}{
		{"valid role", &rbacv1.Role{ObjectMeta: meta("r"), Rules: []rbacv1.PolicyRule{podRule}}, "", ""},
		{"valid cluster role", &rbacv1.ClusterRole{ObjectMeta: cluster, Rules: []rbacv1.PolicyRule{podRule, {Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}}, "", ""},
		{"valid binding", &rbacv1.RoleBinding{ObjectMeta: meta("b"), RoleRef: ref("Role", "r"), Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob"}, {Kind: "ServiceAccount", Name: "sa"}}}, "", ""},
		{"role without verbs", &rbacv1.Role{ObjectMeta: meta("r"), Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}}}}, "rules[0].verbs", "Required value"},
		{"role without groups", &rbacv1.Role{ObjectMeta: meta("r"), Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, Resources: []string{"pods"}}}}, "rules[0].apiGroups", "Required value"},
		{"role with paths", &rbacv1.Role{ObjectMeta: meta("r"), Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/x"}}}}, "rules[0].nonResourceURLs", "namespaced rules"},
		{"paths and resources", &rbacv1.ClusterRole{ObjectMeta: cluster, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, Resources: []string{"pods"}, NonResourceURLs: []string{"/x"}}}}, "rules[0].nonResourceURLs", "both"},
		{"aggregation", &rbacv1.ClusterRole{ObjectMeta: cluster, AggregationRule: &rbacv1.AggregationRule{}}, "aggregationRule", "not supported"},
		{"bad role name", &rbacv1.Role{ObjectMeta: meta("a/b")}, "metadata.name", "may not contain '/'"},
		{"binding to a secret", &rbacv1.RoleBinding{ObjectMeta: meta("b"), RoleRef: ref("Secret", "r")}, "roleRef.kind", "Unsupported value"},
		{"cluster binding to a role", &rbacv1.ClusterRoleBinding{ObjectMeta: cluster, RoleRef: ref("Role", "r")}, "roleRef.kind", "Unsupported value"},
		{"binding wrong group", &rbacv1.RoleBinding{ObjectMeta: meta("b"), RoleRef: rbacv1.RoleRef{APIGroup: "apps", Kind: "Role", Name: "r"}}, "roleRef.apiGroup", "Unsupported value"},
		{"binding no name", &rbacv1.RoleBinding{ObjectMeta: meta("b"), RoleRef: ref("Role", "")}, "roleRef.name", "Required value"},
		{"subject kind", &rbacv1.RoleBinding{ObjectMeta: meta("b"), RoleRef: ref("Role", "r"), Subjects: []rbacv1.Subject{{Kind: "Robot", Name: "x"}}}, "subjects[0].kind", "Unsupported value"},
		{"subject name", &rbacv1.RoleBinding{ObjectMeta: meta("b"), RoleRef: ref("Role", "r"), Subjects: []rbacv1.Subject{{Kind: "Group"}}}, "subjects[0].name", "Required value"},
		{"cluster sa namespace", &rbacv1.ClusterRoleBinding{ObjectMeta: cluster, RoleRef: ref("ClusterRole", "view"), Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sa"}}}, "subjects[0].namespace", "Required value"},
	} {
		check(t, c.name, c.obj, c.path, c.want)
	}
	// roleRef cannot change.
	old := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", ResourceVersion: "1"}, RoleRef: ref("ClusterRole", "view")}
	next := old.DeepCopy()
	next.RoleRef.Name = "edit"
	found := false
	for _, e := range validation.ValidateUpdate(next, old) {
		found = found || e.Field == "roleRef"
	}
	if !found {
		t.Error("a roleRef change was accepted")
	}
}
