package apiserver_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/skiff-sh/skiff/actors/apiwire"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/actors/apiserver/authz"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/internal/tracing/tracingtest"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// Tokens of the secured test cluster (kube's static token file format).
const testTokens = `alice-token,alice,u1,"dev"
bob-token,bob,u2
node-a-token,system:node:a,u3,"system:nodes"
node-b-token,system:node:b,u4,"system:nodes"
`

// secureAPI is a raw HTTPS client of a control plane with APIAuth on, as one user.
type secureAPI struct {
	api
	certed *http.Client // presents the admin client certificate
}

// admin authenticates with the admin client certificate written on first start.
func (a secureAPI) admin() secureAPI { a.c, a.token = a.certed, ""; return a }

func (a secureAPI) as(token string) secureAPI { a.token = token; return a }

// do sends body as JSON (a merge patch for PATCH).
func (a secureAPI) do(method, path, body string) (int, map[string]any, http.Header) {
	a.t.Helper()
	ct := ""
	switch {
	case method == http.MethodPatch:
		ct = "application/merge-patch+json"
	case body != "":
		ct = "application/json"
	}
	return a.send(method, path, ct, body)
}

func (a secureAPI) mustDo(want int, method, path, body string) map[string]any {
	a.t.Helper()
	code, out, _ := a.do(method, path, body)
	if code != want {
		a.t.Fatalf("%s %s as %q: want %d, got %d: %v", method, path, a.token, want, code, out)
	}
	return out
}

func newSecureAPI(t *testing.T, mutate ...func(*controlplane.Config)) (secureAPI, *controlplane.ControlPlane) {
	cp := testutil.StartControlPlane(t, append([]func(*controlplane.Config){apiOnly, func(c *controlplane.Config) {
		c.APIAuth.Enabled = true
		if err := os.WriteFile(filepath.Join(c.DataDir, controlplane.TokenFile), []byte(testTokens), 0o600); err != nil {
			t.Fatal(err)
		}
	}}, mutate...)...)
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cp.PKI().CertPool()}}}
	pair, err := tls.X509KeyPair(cp.PKI().AdminCertPEM, cp.PKI().AdminKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	certed := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cp.PKI().CertPool(), Certificates: []tls.Certificate{pair}}}}
	return secureAPI{api: api{t: t, base: cp.URL(), c: c}, certed: certed}, cp
}

// refused checks one denied request: the code, the exact message, and that the log did not move.
func refused(t *testing.T, cp *controlplane.ControlPlane, a secureAPI, method, path, body string, code int, msg string) {
	t.Helper()
	before := cp.Log.Rev()
	got, out, _ := a.do(method, path, body)
	if got != code || out["message"] != msg {
		t.Errorf("%s %s as %q: got %d %q, want %d %q", method, path, a.token, got, out["message"], code, msg)
	}
	if after := cp.Log.Rev(); after != before {
		t.Errorf("%s %s as %q: the log moved from %d to %d", method, path, a.token, before, after)
	}
}

func TestUnauthenticatedRequestsGet401(t *testing.T) {
	a, cp := newSecureAPI(t)
	if !strings.HasPrefix(cp.URL(), "https://") {
		t.Fatalf("URL %s is not HTTPS", cp.URL())
	}
	for _, c := range []struct{ token, method, path, body string }{
		{"", "GET", podsPath, ""},
		{"", "POST", podsPath, podJSON("p", "")},
		{"", "GET", podsPath + "?watch=true", ""},
		{"wrong-token", "GET", podsPath, ""},
		{"wrong-token", "GET", "/healthz", ""}, // a bad credential is refused even where none is needed
		{"", "GET", "/api", ""},
	} {
		refused(t, cp, a.as(c.token), c.method, c.path, c.body, http.StatusUnauthorized, "Unauthorized")
	}
	for _, p := range []string{"/healthz", "/livez", "/readyz", "/version"} {
		a.mustDo(http.StatusOK, "GET", p, "")
	}
	// The admin client certificate gets in.
	a.admin().mustDo(http.StatusOK, "GET", podsPath, "")
}

func TestRBACForbidsAndWritesNothing(t *testing.T) {
	a, cp := newSecureAPI(t)
	admin, bob := a.admin(), a.as("bob-token")
	admin.mustDo(http.StatusCreated, "POST", "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}`)
	admin.mustDo(http.StatusCreated, "POST", "/api/v1/namespaces/x/pods", podJSON("web", ""))

	for _, c := range []struct{ method, path, body, msg string }{
		{"GET", "/api/v1/namespaces/x/pods", "", `pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "x"`},
		{"GET", "/api/v1/namespaces/x/pods?watch=true", "", `pods is forbidden: User "bob" cannot watch resource "pods" in API group "" in the namespace "x"`},
		{"GET", "/api/v1/watch/namespaces/x/pods", "", `pods is forbidden: User "bob" cannot watch resource "pods" in API group "" in the namespace "x"`},
		{"POST", "/api/v1/namespaces/x/pods", podJSON("evil", ""), `pods is forbidden: User "bob" cannot create resource "pods" in API group "" in the namespace "x"`},
		{"DELETE", "/api/v1/namespaces/x/pods/web", "", `pods "web" is forbidden: User "bob" cannot delete resource "pods" in API group "" in the namespace "x"`},
		{"GET", "/api/v1/namespaces/x/pods/web/log", "", `pods "web" is forbidden: User "bob" cannot get resource "pods/log" in API group "" in the namespace "x"`},
		{"GET", "/api/v1/namespaces/x/pods/web/exec?command=sh", "", `pods "web" is forbidden: User "bob" cannot create resource "pods/exec" in API group "" in the namespace "x"`},
		{"GET", "/api/v1/namespaces/x/pods/web/attach?stdout=true", "", `pods "web" is forbidden: User "bob" cannot create resource "pods/attach" in API group "" in the namespace "x"`},
		{"POST", "/api/v1/namespaces/x/pods/web/portforward", "", `pods "web" is forbidden: User "bob" cannot create resource "pods/portforward" in API group "" in the namespace "x"`},
		{"PUT", "/apis/apps/v1/namespaces/x/deployments/d/scale", `{}`, `deployments.apps "d" is forbidden: User "bob" cannot update resource "deployments/scale" in API group "apps" in the namespace "x"`},
		{"GET", "/api/v1/nodes", "", `nodes is forbidden: User "bob" cannot list resource "nodes" in API group "" at the cluster scope`},
		{"POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", `{}`, `clusterrolebindings.rbac.authorization.k8s.io is forbidden: User "bob" cannot create resource "clusterrolebindings" in API group "rbac.authorization.k8s.io" at the cluster scope`},
		{"GET", "/metrics", "", `forbidden: User "bob" cannot get path "/metrics"`},
	} {
		refused(t, cp, bob, c.method, c.path, c.body, http.StatusForbidden, c.msg)
	}
	// Discovery is open to every authenticated user.
	bob.mustDo(http.StatusOK, "GET", "/api", "")
	out := bob.mustDo(http.StatusOK, "GET", "/apis", "")
	if !strings.Contains(fmt.Sprint(out), "rbac.authorization.k8s.io") {
		t.Errorf("discovery does not list the RBAC group: %v", out)
	}

	// A Role bound in x lets bob read pods there, and nothing more.
	admin.mustDo(http.StatusCreated, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/x/roles",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"pod-reader"},"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get","list","watch"]}]}`)
	rb := admin.mustDo(http.StatusCreated, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/x/rolebindings",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"bob-reads"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"pod-reader"},"subjects":[{"kind":"User","name":"bob"}]}`)
	if get(rb, "subjects") == nil || fmt.Sprint(get(rb, "subjects")) != "[map[apiGroup:rbac.authorization.k8s.io kind:User name:bob]]" {
		t.Errorf("subject apiGroup not defaulted: %v", get(rb, "subjects"))
	}
	testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if code, out, _ := bob.do("GET", "/api/v1/namespaces/x/pods", ""); code != http.StatusOK {
			return fmt.Errorf("bob list after binding: %d %v", code, out["message"])
		}
		return nil
	})
	bob.mustDo(http.StatusOK, "GET", "/api/v1/namespaces/x/pods/web", "")
	refused(t, cp, bob, "POST", "/api/v1/namespaces/x/pods", podJSON("evil", ""), http.StatusForbidden,
		`pods is forbidden: User "bob" cannot create resource "pods" in API group "" in the namespace "x"`)
	refused(t, cp, bob, "GET", "/api/v1/namespaces/default/pods", "", http.StatusForbidden,
		`pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "default"`)
	refused(t, cp, bob, "PUT", "/api/v1/namespaces/x/pods/web/status", `{}`, http.StatusForbidden,
		`pods "web" is forbidden: User "bob" cannot update resource "pods/status" in API group "" in the namespace "x"`)

	// The bootstrap "edit" ClusterRole bound to group dev in x lets alice write there.
	admin.mustDo(http.StatusCreated, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/x/rolebindings",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"dev-edits"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"edit"},"subjects":[{"kind":"Group","name":"dev"}]}`)
	alice := a.as("alice-token")
	testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if code, out, _ := alice.do("POST", "/api/v1/namespaces/x/pods", podJSON("alices", "")); code != http.StatusCreated {
			return fmt.Errorf("alice create: %d %v", code, out["message"])
		}
		return nil
	})
	refused(t, cp, alice, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/x/rolebindings", `{}`, http.StatusForbidden,
		`rolebindings.rbac.authorization.k8s.io is forbidden: User "alice" cannot create resource "rolebindings" in API group "rbac.authorization.k8s.io" in the namespace "x"`)
}

func TestRBACObjectsAreValidated(t *testing.T) {
	a, cp := newSecureAPI(t)
	admin := a.admin()
	const base = "/apis/rbac.authorization.k8s.io/v1"
	for _, c := range []struct{ path, body, field string }{
		{base + "/namespaces/default/roles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r"},"rules":[{"apiGroups":[""],"resources":["pods"]}]}`, "rules[0].verbs"},
		{base + "/namespaces/default/roles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r"},"rules":[{"verbs":["get"],"nonResourceURLs":["/x"]}]}`, "rules[0].nonResourceURLs"},
		{base + "/clusterroles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r"},"rules":[{"verbs":["get"],"resources":["pods"]}]}`, "rules[0].apiGroups"},
		{base + "/namespaces/default/rolebindings", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"b"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Secret","name":"r"}}`, "roleRef.kind"},
		{base + "/clusterrolebindings", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"b"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"}}`, "roleRef.kind"},
		{base + "/clusterrolebindings", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"b"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},"subjects":[{"kind":"ServiceAccount","name":"sa"}]}`, "subjects[0].namespace"},
		{base + "/clusterrolebindings", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"b"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":""}}`, "roleRef.name"},
	} {
		before := cp.Log.Rev()
		code, out, _ := admin.do("POST", c.path, c.body)
		if code != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(out["message"]), c.field) {
			t.Errorf("%s: got %d %q, want 422 naming %s", c.body, code, out["message"], c.field)
		}
		if cp.Log.Rev() != before {
			t.Errorf("%s: the log moved", c.body)
		}
	}
	// roleRef is immutable.
	admin.mustDo(http.StatusCreated, "POST", base+"/clusterrolebindings", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"b"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"}}`)
	code, out, _ := admin.do("PATCH", base+"/clusterrolebindings/b", `{"roleRef":{"name":"edit"}}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(out["message"]), "roleRef") {
		t.Errorf("roleRef change: %d %v", code, out["message"])
	}
}

func TestNodeRestriction(t *testing.T) {
	a, cp := newSecureAPI(t)
	admin, na, nb := a.admin(), a.as("node-a-token"), a.as("node-b-token")
	nodeJSON := func(name string) string {
		return `{"apiVersion":"v1","kind":"Node","metadata":{"name":"` + name + `"}}`
	}
	leaseJSON := func(name string) string {
		return `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"` + name + `","namespace":"kube-node-lease"},"spec":{"holderIdentity":"` + name + `"}}`
	}
	admin.mustDo(http.StatusCreated, "POST", podsPath, podJSON("on-a", "")[:len(podJSON("on-a", ""))-2]+`,"nodeName":"a"}}`)

	na.mustDo(http.StatusCreated, "POST", "/api/v1/nodes", nodeJSON("a"))
	na.mustDo(http.StatusOK, "PATCH", "/api/v1/nodes/a/status", `{"status":{"phase":"Running"}}`)
	na.mustDo(http.StatusOK, "PATCH", "/api/v1/nodes/a", `{"metadata":{"labels":{"x":"y"}}}`)
	na.mustDo(http.StatusCreated, "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", leaseJSON("a"))
	na.mustDo(http.StatusOK, "PATCH", podsPath+"/on-a/status", `{"status":{"phase":"Running"}}`)
	na.mustDo(http.StatusCreated, "POST", "/api/v1/namespaces/default/events",
		`{"apiVersion":"v1","kind":"Event","metadata":{"name":"e1"},"involvedObject":{"kind":"Pod","name":"on-a","namespace":"default"},"reason":"Started","message":"m","type":"Normal"}`)
	na.mustDo(http.StatusOK, "GET", podsPath, "")

	for _, c := range []struct {
		who                     secureAPI
		method, path, body, msg string
	}{
		{nb, "PATCH", podsPath + "/on-a/status", `{"status":{"phase":"Failed"}}`,
			`pods "on-a" is forbidden: node "b" may only update the status of pods bound to it; pod "on-a" is bound to "a"`},
		{nb, "PUT", podsPath + "/on-a/status", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"on-a"},"spec":{"containers":[{"name":"c","image":"img"}]},"status":{"phase":"Failed"}}`,
			`pods "on-a" is forbidden: node "b" may only update the status of pods bound to it; pod "on-a" is bound to "a"`},
		{nb, "DELETE", podsPath + "/on-a", "", `pods "on-a" is forbidden: node "b" may only delete pods bound to it; pod "on-a" is bound to "a"`},
		{nb, "PATCH", "/api/v1/nodes/a/status", `{"status":{"phase":"Terminated"}}`, `nodes "a" is forbidden: node "b" may not modify node "a"`},
		{nb, "PATCH", "/api/v1/nodes/a", `{"metadata":{"labels":{"x":"z"}}}`, `nodes "a" is forbidden: node "b" may not modify node "a"`},
		{nb, "DELETE", "/api/v1/nodes/a", "", `nodes "a" is forbidden: node "b" may not modify node "a"`},
		{nb, "PATCH", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/a", `{"spec":{"holderIdentity":"b"}}`,
			`leases.coordination.k8s.io "a" is forbidden: node "b" may only modify its own Lease kube-node-lease/b`},
		{na, "PATCH", podsPath + "/on-a", `{"metadata":{"labels":{"x":"y"}}}`, `pods "on-a" is forbidden: User "system:node:a" cannot patch resource "pods" in API group "" in the namespace "default"`},
		{na, "POST", podsPath, podJSON("mine", ""), `pods is forbidden: User "system:node:a" cannot create resource "pods" in API group "" in the namespace "default"`},
		{na, "POST", "/api/v1/namespaces/default/configmaps", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`,
			`configmaps is forbidden: User "system:node:a" cannot create resource "configmaps" in API group "" in the namespace "default"`},
		{na, "POST", podsPath + "/on-a/binding", `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"on-a"},"target":{"kind":"Node","name":"a"}}`,
			`pods "on-a" is forbidden: User "system:node:a" cannot create resource "pods/binding" in API group "" in the namespace "default"`},
	} {
		refused(t, cp, c.who, c.method, c.path, c.body, http.StatusForbidden, c.msg)
	}
	// a ends the graceful delete of its own pod.
	na.mustDo(http.StatusOK, "DELETE", podsPath+"/on-a", `{"gracePeriodSeconds":0}`)
}

func TestClientRateLimit(t *testing.T) {
	a, _ := newSecureAPI(t, func(c *controlplane.Config) { c.APIAuth.ClientQPS, c.APIAuth.ClientBurst = 0.5, 3 })
	bob := a.as("bob-token")
	for i := 0; i < 3; i++ {
		if code, _, _ := bob.do("GET", "/api", ""); code != http.StatusOK {
			t.Fatalf("request %d within the burst: %d", i, code)
		}
	}
	code, out, h := bob.do("GET", "/api", "")
	if code != http.StatusTooManyRequests || h.Get("Retry-After") != "2" || out["message"] != "Too many requests, please try again later." {
		t.Fatalf("over the limit: %d Retry-After %q %v", code, h.Get("Retry-After"), out["message"])
	}
	// Another user has a bucket of its own; system:masters is exempt.
	a.as("alice-token").mustDo(http.StatusOK, "GET", "/api", "")
	admin := a.admin()
	for i := 0; i < 10; i++ {
		admin.mustDo(http.StatusOK, "GET", "/api", "")
	}
}

func TestBodyLimitWithAuth(t *testing.T) {
	a, cp := newSecureAPI(t)
	big := podJSON("big", `,"annotations":{"a":"`+strings.Repeat("x", 3<<20)+`"}`)
	refused(t, cp, a.admin(), "POST", podsPath, big, http.StatusRequestEntityTooLarge, "Request entity too large: limit is 3145728 bytes")
}

// TestTokensStayOutOfSpans: the bearer token appears in no span attribute or event.
func TestTokensStayOutOfSpans(t *testing.T) {
	exp, _ := tracingtest.InMemory(t)
	a, _ := newSecureAPI(t)
	admin := a.admin()
	admin.mustDo(http.StatusCreated, "POST", podsPath, podJSON("traced", ""))
	a.as("alice-token").do("POST", podsPath, podJSON("alices", ""))
	a.as("bob-token").do("GET", podsPath, "")
	spans := exp.GetSpans()
	if len(spans) == 0 {
		t.Fatal("no spans recorded")
	}
	dump, _ := json.Marshal(spans)
	for _, secret := range []string{"alice-token", "bob-token", "Bearer"} {
		if strings.Contains(string(dump), secret) {
			t.Errorf("a span carries %q", secret)
		}
	}
}

// TestIdentityFromTheTransport: a User put into the context by a trusted transport (NATS) is
// honoured as is, and the bootstrap roles of the components apply to it.
func TestIdentityFromTheTransport(t *testing.T) {
	a, cp := newSecureAPI(t)
	a.admin().mustDo(http.StatusCreated, "POST", podsPath, podJSON("p", ""))
	call := func(ctx context.Context, method, path, body string) (int, any) {
		ct := "application/json"
		if method == http.MethodPatch {
			ct = "application/merge-patch+json"
		}
		var resp apiwire.Response
		if err := json.Unmarshal(cp.API.ServeWire(ctx, apiwire.Request{Method: method, Path: path, ContentType: ct, Body: []byte(body)}), &resp); err != nil {
			t.Fatal(err)
		}
		var st map[string]any
		_ = json.Unmarshal(resp.Body, &st)
		return resp.Code, st["message"]
	}
	sched := authn.User{Name: authz.SchedulerUser, Groups: []string{authn.GroupAuthenticated}}
	ctrl := authn.User{Name: authz.ControllerManagerUser, Groups: []string{authn.GroupAuthenticated}}
	nodeB := authn.User{Name: "system:node:b", Groups: []string{authn.GroupNodes, authn.GroupAuthenticated}}
	binding := `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p"},"target":{"kind":"Node","name":"a"}}`
	for _, c := range []struct {
		u                  authn.User
		method, path, body string
		code               int
		msg                any
	}{
		{sched, "DELETE", podsPath + "/p", "", 403, `pods "p" is forbidden: User "system:kube-scheduler" cannot delete resource "pods" in API group "" in the namespace "default"`},
		{sched, "POST", "/api/v1/namespaces/default/secrets", `{}`, 403, `secrets is forbidden: User "system:kube-scheduler" cannot create resource "secrets" in API group "" in the namespace "default"`},
		{ctrl, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", `{}`, 403, `clusterrolebindings.rbac.authorization.k8s.io is forbidden: User "system:kube-controller-manager" cannot create resource "clusterrolebindings" in API group "rbac.authorization.k8s.io" at the cluster scope`},
		{sched, "POST", podsPath + "/p/binding", binding, 201, nil},
		{nodeB, "PATCH", podsPath + "/p/status", `{"status":{"phase":"Running"}}`, 403, `pods "p" is forbidden: node "b" may only update the status of pods bound to it; pod "p" is bound to "a"`},
		{ctrl, "GET", podsPath, "", 200, nil},
	} {
		before := cp.Log.Rev()
		if code, msg := call(authn.WithUser(context.Background(), c.u), c.method, c.path, c.body); code != c.code || msg != c.msg {
			t.Errorf("%s %s as %s: %d %v, want %d %v", c.method, c.path, c.u.Name, code, msg, c.code, c.msg)
		}
		if c.code >= 400 && cp.Log.Rev() != before {
			t.Errorf("%s %s as %s: the log moved", c.method, c.path, c.u.Name)
		}
	}
	// A NATS request without an identity is Auth.WireUser (here: the control plane itself).
	if code, msg := call(context.Background(), "DELETE", podsPath+"/p", `{"gracePeriodSeconds":0}`); code != 200 {
		t.Errorf("wire request without identity: %d %v", code, msg)
	}
}

// TestSecuredControlPlaneRuns: with authentication on, the in-process scheduler and controllers
// still do their work over NATS.
func TestSecuredControlPlaneRuns(t *testing.T) {
	a, _ := newSecureAPI(t, func(c *controlplane.Config) { c.Components = nil })
	a.admin().mustDo(http.StatusCreated, "POST", "/apis/apps/v1/namespaces/default/deployments",
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"img"}]}}}}`)
	testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
		out := a.admin().mustDo(http.StatusOK, "GET", podsPath, "")
		if items, _ := out["items"].([]any); len(items) != 2 {
			return fmt.Errorf("%d pods, want 2", len(items))
		}
		return nil
	})
}

// BenchmarkSecuredGet: the cost of HTTPS + authentication + RBAC on a GET, against plain HTTP.
func BenchmarkSecuredGet(b *testing.B) {
	for _, c := range []struct {
		name   string
		secure bool
		token  string
	}{{"plain-http", false, ""}, {"https-token-rbac", true, "bob-token"}, {"https-admin-cert", true, ""}} {
		b.Run(c.name, func(b *testing.B) {
			var base string
			client := http.DefaultClient
			token := c.token
			if c.secure {
				cp := testutil.StartControlPlane(b, apiOnly, func(cfg *controlplane.Config) {
					cfg.APIAuth.Enabled = true
					_ = os.WriteFile(filepath.Join(cfg.DataDir, controlplane.TokenFile), []byte(testTokens+"\n"), 0o600)
				})
				base = cp.URL()
				tlsCfg := &tls.Config{RootCAs: cp.PKI().CertPool()}
				if token == "" {
					pair, _ := tls.X509KeyPair(cp.PKI().AdminCertPEM, cp.PKI().AdminKeyPEM)
					tlsCfg.Certificates = []tls.Certificate{pair}
				} else {
					// bob may read pods in default through a ClusterRole bound there.
					cp.API.ServeWire(context.Background(), apiwire.Request{Method: "POST", Path: "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", ContentType: "application/json",
						Body: []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"bob-views"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},"subjects":[{"kind":"User","name":"bob"}]}`)})
				}
				client = &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, MaxIdleConnsPerHost: 8}}
			} else {
				base = testutil.StartControlPlane(b, apiOnly).URL()
			}
			req, _ := http.NewRequest("GET", base+"/api/v1/namespaces/default", nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			testutil.Eventually(b, 5*time.Second, 10*time.Millisecond, func() error { // the binding is in effect
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("status %d", resp.StatusCode)
				}
				return nil
			})
			b.ResetTimer()
			for b.Loop() {
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

// TestFullySecuredControlPlane is `skiff up`'s default: NATS secured per component (the
// scheduler and controllers call the API as themselves) and the API authenticated. The bootstrap
// roles must let them do their work: a Deployment becomes bound pods and Events.
func TestFullySecuredControlPlane(t *testing.T) {
	a, _ := newSecureAPI(t, func(c *controlplane.Config) {
		c.Components = nil
		c.NATSPort, c.NATSAuthDir = -1, filepath.Join(c.DataDir, controlplane.NATSKeysDir)
	})
	admin := a.admin()
	admin.mustDo(http.StatusCreated, "POST", "/api/v1/nodes", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}`)
	admin.mustDo(http.StatusOK, "PATCH", "/api/v1/nodes/n1/status", `{"status":{"capacity":{"cpu":"4","memory":"8Gi","pods":"110"},"allocatable":{"cpu":"4","memory":"8Gi","pods":"110"},"conditions":[{"type":"Ready","status":"True"}]}}`)
	admin.mustDo(http.StatusCreated, "POST", "/apis/apps/v1/namespaces/default/deployments",
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"img"}]}}}}`)
	testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
		out := admin.mustDo(http.StatusOK, "GET", podsPath, "")
		items, _ := out["items"].([]any)
		bound := 0
		for _, it := range items {
			if get(it.(map[string]any), "spec", "nodeName") == "n1" {
				bound++
			}
		}
		if bound != 2 {
			return fmt.Errorf("%d of %d pods bound to n1", bound, len(items))
		}
		return nil
	})
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		out := admin.mustDo(http.StatusOK, "GET", "/api/v1/namespaces/default/events", "")
		if !strings.Contains(fmt.Sprint(out["items"]), "Scheduled") {
			return errors.New("no Scheduled event yet")
		}
		return nil
	})
}
