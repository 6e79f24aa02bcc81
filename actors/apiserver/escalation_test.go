package apiserver_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

const rbacBase = "/apis/rbac.authorization.k8s.io/v1"

// escalationAPI is a secured cluster with two more users: carol and dave.
func escalationAPI(t *testing.T) (secureAPI, *controlplane.ControlPlane) {
	return newSecureAPI(t, func(c *controlplane.Config) {
		tokens := testTokens + "carol-token,carol,u5\ndave-token,dave,u6\n"
		if err := os.WriteFile(filepath.Join(c.DataDir, controlplane.TokenFile), []byte(tokens), 0o600); err != nil {
			t.Fatal(err)
		}
	})
}

func roleJSON(kind, name, rules string) string {
	return fmt.Sprintf(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":%q,"metadata":{"name":%q},"rules":%s}`, kind, name, rules)
}

func bindingJSON(name, roleKind, role, user string) string {
	return fmt.Sprintf(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":%q},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":%q,"name":%q},"subjects":[{"kind":"User","name":%q}]}`, name, roleKind, role, user)
}

// grantedEventually waits until the RBAC mirror lets a make one probe request.
func grantedEventually(t *testing.T, a secureAPI, method, path, body string, want int) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if code, out, _ := a.do(method, path, body); code != want {
			return fmt.Errorf("%s %s as %s: %d %v", method, path, a.token, code, out["message"])
		}
		return nil
	})
}

// escalationRefused checks a 403 whose message is Kubernetes' escalation refusal listing
// exactly the missing rules, and that nothing was written.
func escalationRefused(t *testing.T, cp *controlplane.ControlPlane, a secureAPI, path, body, prefix string, missing ...string) {
	t.Helper()
	before := cp.Log.Rev()
	var code int
	var out map[string]any
	// The check resolves the role a binding names from the authorizer's cache, which may not
	// hold a role written a moment ago yet (404, nothing written): asked again until it does.
	testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if code, out, _ = a.do("POST", path, body); code == http.StatusNotFound {
			return fmt.Errorf("POST %s as %s: %d %v", path, a.token, code, out["message"])
		}
		return nil
	})
	msg := fmt.Sprint(out["message"])
	want := prefix + ` is forbidden: user "` + strings.TrimSuffix(a.token, "-token") + `" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:` + "\n" + strings.Join(missing, "\n")
	if code != http.StatusForbidden || msg != want {
		t.Errorf("POST %s as %s: got %d %q, want 403 %q", path, a.token, code, msg, want)
	}
	if after := cp.Log.Rev(); after != before {
		t.Errorf("POST %s as %s: the log moved from %d to %d", path, a.token, before, after)
	}
}

// Issue #13: the right to create RoleBindings in a namespace is not the right to bind
// cluster-admin there; `bind` on that one ClusterRole is.
func TestRBACBindingEscalation(t *testing.T) {
	a, cp := escalationAPI(t)
	admin, carol := a.admin(), a.as("carol-token")
	admin.mustDo(http.StatusCreated, "POST", "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a"}}`)
	admin.mustDo(http.StatusCreated, "POST", "/api/v1/namespaces/team-a/secrets", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"stringData":{"k":"v"}}`)
	admin.mustDo(http.StatusCreated, "POST", rbacBase+"/namespaces/team-a/roles",
		roleJSON("Role", "binding-creator", `[{"apiGroups":["rbac.authorization.k8s.io"],"resources":["rolebindings"],"verbs":["create","list"]}]`))
	admin.mustDo(http.StatusCreated, "POST", rbacBase+"/namespaces/team-a/rolebindings", bindingJSON("carol-binds", "Role", "binding-creator", "carol"))
	bindings := rbacBase + "/namespaces/team-a/rolebindings"
	grantedEventually(t, carol, "GET", bindings, "", http.StatusOK)

	everything := `{APIGroups:["*"], Resources:["*"], Verbs:["*"]}`
	escalationRefused(t, cp, carol, bindings, bindingJSON("carol-cluster-admin", "ClusterRole", "cluster-admin", "carol"),
		`rolebindings.rbac.authorization.k8s.io "carol-cluster-admin"`, everything, `{NonResourceURLs:["*"], Verbs:["*"]}`)
	escalationRefused(t, cp, carol, bindings, bindingJSON("carol-admin", "ClusterRole", "admin", "carol"),
		`rolebindings.rbac.authorization.k8s.io "carol-admin"`, everything)
	refused(t, cp, carol, "GET", "/api/v1/namespaces/team-a/secrets", "", http.StatusForbidden,
		`secrets is forbidden: User "carol" cannot list resource "secrets" in API group "" in the namespace "team-a"`)

	// `bind` on cluster-admin alone (resourceNames), granted in team-a. The configmaps rule is
	// a probe that tells when the grant is in the authorizer's mirror.
	admin.mustDo(http.StatusCreated, "POST", rbacBase+"/clusterroles", roleJSON("ClusterRole", "bind-cluster-admin",
		`[{"apiGroups":["rbac.authorization.k8s.io"],"resources":["clusterroles"],"verbs":["bind"],"resourceNames":["cluster-admin"]},{"apiGroups":[""],"resources":["configmaps"],"verbs":["list"]}]`))
	admin.mustDo(http.StatusCreated, "POST", bindings, bindingJSON("carol-may-bind", "ClusterRole", "bind-cluster-admin", "carol"))
	grantedEventually(t, carol, "GET", "/api/v1/namespaces/team-a/configmaps", "", http.StatusOK)
	escalationRefused(t, cp, carol, bindings, bindingJSON("carol-admin", "ClusterRole", "admin", "carol"),
		`rolebindings.rbac.authorization.k8s.io "carol-admin"`, everything)
	carol.mustDo(http.StatusCreated, "POST", bindings, bindingJSON("carol-cluster-admin", "ClusterRole", "cluster-admin", "carol"))
	grantedEventually(t, carol, "GET", "/api/v1/namespaces/team-a/secrets", "", http.StatusOK)
	// The binding is namespaced: nothing outside team-a, and no ClusterRoleBindings.
	refused(t, cp, carol, "GET", "/api/v1/namespaces/default/secrets", "", http.StatusForbidden,
		`secrets is forbidden: User "carol" cannot list resource "secrets" in API group "" in the namespace "default"`)
	// Holding every right of admin in team-a now, she may bind it there without `bind`.
	carol.mustDo(http.StatusCreated, "POST", bindings, bindingJSON("carol-admin", "ClusterRole", "admin", "carol"))

	// Her rights in team-a do not count cluster-wide: a ClusterRoleBinding of admin is refused.
	admin.mustDo(http.StatusCreated, "POST", rbacBase+"/clusterroles", roleJSON("ClusterRole", "crb-creator",
		`[{"apiGroups":["rbac.authorization.k8s.io"],"resources":["clusterrolebindings"],"verbs":["create","list"]}]`))
	admin.mustDo(http.StatusCreated, "POST", rbacBase+"/clusterrolebindings", strings.Replace(bindingJSON("carol-crb", "ClusterRole", "crb-creator", "carol"), `"RoleBinding"`, `"ClusterRoleBinding"`, 1))
	grantedEventually(t, carol, "GET", rbacBase+"/clusterrolebindings", "", http.StatusOK)
	escalationRefused(t, cp, carol, rbacBase+"/clusterrolebindings", strings.Replace(bindingJSON("carol-everywhere", "ClusterRole", "admin", "carol"), `"RoleBinding"`, `"ClusterRoleBinding"`, 1),
		`clusterrolebindings.rbac.authorization.k8s.io "carol-everywhere"`, everything)
}

// A user may bind a role whose rules he holds, and may write a Role only within what he
// holds unless he may `escalate` roles.
func TestRBACRoleEscalation(t *testing.T) {
	a, cp := escalationAPI(t)
	admin, dave := a.admin(), a.as("dave-token")
	admin.mustDo(http.StatusCreated, "POST", "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-b"}}`)
	roles, bindings := rbacBase+"/namespaces/team-b/roles", rbacBase+"/namespaces/team-b/rolebindings"
	admin.mustDo(http.StatusCreated, "POST", roles, roleJSON("Role", "dave", `[{"apiGroups":["rbac.authorization.k8s.io"],"resources":["roles","rolebindings"],"verbs":["create","get","update"]},{"apiGroups":[""],"resources":["pods"],"verbs":["get","list"]}]`))
	admin.mustDo(http.StatusCreated, "POST", bindings, bindingJSON("dave", "Role", "dave", "dave"))
	grantedEventually(t, dave, "GET", "/api/v1/namespaces/team-b/pods", "", http.StatusOK)

	// Within his rights: a Role, and a binding of it for someone else.
	dave.mustDo(http.StatusCreated, "POST", roles, roleJSON("Role", "pod-reader", `[{"apiGroups":[""],"resources":["pods"],"verbs":["list","get"]}]`))
	grantedEventually(t, dave, "POST", bindings, bindingJSON("bob-reads", "Role", "pod-reader", "bob"), http.StatusCreated)
	// Beyond them: only what he lacks is named.
	admin.mustDo(http.StatusCreated, "POST", roles, roleJSON("Role", "pod-writer", `[{"apiGroups":[""],"resources":["pods"],"verbs":["get","create","delete"]}]`))
	grantedEventually(t, admin, "GET", roles+"/pod-writer", "", http.StatusOK)
	escalationRefused(t, cp, dave, bindings, bindingJSON("bob-writes", "Role", "pod-writer", "bob"),
		`rolebindings.rbac.authorization.k8s.io "bob-writes"`, `{APIGroups:[""], Resources:["pods"], Verbs:["create" "delete"]}`)
	secretReader := roleJSON("Role", "secret-reader", `[{"apiGroups":[""],"resources":["secrets"],"verbs":["get"]},{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]`)
	escalationRefused(t, cp, dave, roles, secretReader,
		`roles.rbac.authorization.k8s.io "secret-reader"`, `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`)
	// Updating a Role to more rights is refused the same way; the stored Role is unchanged.
	code, out, _ := dave.do("PUT", roles+"/pod-reader", roleJSON("Role", "pod-reader", `[{"apiGroups":[""],"resources":["pods","secrets"],"verbs":["get"]}]`))
	if code != http.StatusForbidden || !strings.Contains(fmt.Sprint(out["message"]), "attempting to grant RBAC permissions not currently held:\n"+`{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`) {
		t.Errorf("escalating update: %d %v", code, out["message"])
	}
	if got := fmt.Sprint(get(admin.mustDo(http.StatusOK, "GET", roles+"/pod-reader", ""), "rules")); strings.Contains(got, "secrets") {
		t.Errorf("the refused update was stored: %s", got)
	}

	// With `escalate` on roles he may write any Role.
	admin.mustDo(http.StatusCreated, "POST", roles, roleJSON("Role", "escalator", `[{"apiGroups":["rbac.authorization.k8s.io"],"resources":["roles"],"verbs":["escalate"]},{"apiGroups":[""],"resources":["configmaps"],"verbs":["list"]}]`))
	admin.mustDo(http.StatusCreated, "POST", bindings, bindingJSON("dave-escalates", "Role", "escalator", "dave"))
	grantedEventually(t, dave, "GET", "/api/v1/namespaces/team-b/configmaps", "", http.StatusOK)
	dave.mustDo(http.StatusCreated, "POST", roles, secretReader)
	// `escalate` does not let him bind it: he still cannot read secrets.
	escalationRefused(t, cp, dave, bindings, bindingJSON("dave-secrets", "Role", "secret-reader", "dave"),
		`rolebindings.rbac.authorization.k8s.io "dave-secrets"`, `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`)
}
