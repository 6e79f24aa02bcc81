package apiserver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/actors/apiwire"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// kubectlSecured runs a stock kubectl against a secured control plane with token as its
// credential ("" = the admin client certificate). The exit code is returned with the output.
func kubectlSecured(t *testing.T, cp *controlplane.ControlPlane, token string) func(args ...string) (string, int) {
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	user := "{token: " + token + "}"
	if token == "" {
		user = "{client-certificate-data: " + b64(cp.PKI().AdminCertPEM) + ", client-key-data: " + b64(cp.PKI().AdminKeyPEM) + "}"
	}
	run := kubectlWithConfig(t, "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster: {server: "+cp.URL()+", certificate-authority-data: "+b64(cp.PKI().CAPEM)+
		"}\nusers:\n- name: u\n  user: "+user+"\ncontexts:\n- name: c\n  context: {cluster: s, user: u, namespace: default}\ncurrent-context: c\n")
	return func(args ...string) (string, int) {
		out, err := run(args...)
		if ee, ok := err.(*exec.ExitError); ok {
			return out, ee.ExitCode()
		} else if err != nil {
			t.Fatalf("kubectl %v: %v", args, err)
		}
		return out, 0
	}
}

// waitOutput runs kubectl until its output contains want (RBAC objects reach the authorizer's
// mirror a moment after their write).
func waitOutput(t *testing.T, kubectl func(...string) (string, int), want string, args ...string) string {
	t.Helper()
	var out string
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		if out, _ = kubectl(args...); !strings.Contains(out, want) {
			return fmt.Errorf("kubectl %v: want %q, got\n%s", args, want, out)
		}
		return nil
	})
	return out
}

func mustContain(t *testing.T, what, out string, code, wantCode int, wants ...string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("%s: exit code %d, want %d\n%s", what, code, wantCode, out)
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s: want %q in\n%s", what, w, out)
		}
	}
}

const impersonatorRole = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: impersonate-bob}
rules:
- {apiGroups: [""], resources: [users], verbs: [impersonate], resourceNames: [bob]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: alice-impersonates-bob}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: impersonate-bob}
subjects:
- {kind: User, name: alice}
`

func TestKubectlAuthCanIWhoamiAndImpersonation(t *testing.T) {
	_, cp := newSecureAPI(t)
	admin, alice, bob := kubectlSecured(t, cp, ""), kubectlSecured(t, cp, "alice-token"), kubectlSecured(t, cp, "bob-token")

	out, code := admin("auth", "can-i", "create", "pods")
	mustContain(t, "admin can-i", out, code, 0, "yes")
	out, code = bob("auth", "can-i", "create", "pods")
	mustContain(t, "bob can-i", out, code, 1, "no")
	out, code = admin("auth", "can-i", "create", "pods", "--as", "bob")
	mustContain(t, "admin can-i --as bob", out, code, 1, "no")

	out, code = bob("auth", "whoami")
	mustContain(t, "bob whoami", out, code, 0, "ATTRIBUTE", "Username", "bob", "UID", "u2", "Groups", "[system:authenticated]")
	out, code = admin("auth", "whoami", "--as", "bob", "--as-group", "dev")
	mustContain(t, "admin whoami --as bob", out, code, 0, "bob", "[dev system:authenticated]")

	// Without the impersonate verb alice is refused in Kubernetes' words. (kubectl get prints
	// "Error from server (Forbidden): unknown" against Kubernetes too: its discovery client
	// does not decode the Status of a refused /api.)
	out, code = alice("auth", "whoami", "--as", "bob")
	mustContain(t, "alice whoami --as bob", out, code, 1, "error: the selfsubjectreviews API is not enabled in the cluster or you do not have permission to call it")
	out, code = alice("auth", "can-i", "get", "/api", "--as", "bob")
	mustContain(t, "alice --as bob", out, code, 1,
		`users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope`)
	out, code = alice("get", "pods", "--as", "bob")
	mustContain(t, "alice get --as bob", out, code, 1, "Error from server (Forbidden)")

	// A ClusterRole granting impersonate on user bob lets her act as bob, with bob's rights.
	if out, code := admin("apply", "-f", writeFile(t, "imp.yaml", impersonatorRole)); code != 0 {
		t.Fatalf("apply impersonator role: %s", out)
	}
	out = waitOutput(t, alice, "Username", "auth", "whoami", "--as", "bob")
	mustContain(t, "alice whoami --as bob", out, 0, 0, "bob", "[system:authenticated]")
	out, code = alice("get", "pods", "--as", "bob")
	mustContain(t, "alice get pods --as bob", out, code, 1,
		`pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "default"`)
	// ...but not as anyone else, nor with groups she may not impersonate.
	out, code = alice("auth", "can-i", "get", "/api", "--as", "carol")
	mustContain(t, "alice --as carol", out, code, 1, `users "carol" is forbidden: User "alice" cannot impersonate resource "users"`)
	out, code = alice("auth", "can-i", "get", "/api", "--as", "bob", "--as-group", "system:masters")
	mustContain(t, "alice --as-group system:masters", out, code, 1,
		`groups "system:masters" is forbidden: User "alice" cannot impersonate resource "groups" in API group "" at the cluster scope`)

	// --list prints the rules: bob holds the self reviews and discovery, then view in default.
	out, code = bob("auth", "can-i", "--list")
	mustContain(t, "bob can-i --list", out, code, 0, "Resources", "Non-Resource URLs", "Resource Names", "Verbs",
		"selfsubjectaccessreviews.authorization.k8s.io", "[create]", "[/api/*]")
	if strings.Contains(out, "pods ") {
		t.Errorf("bob lists pod rights before any binding:\n%s", out)
	}
	if out, code := admin("create", "rolebinding", "bob-views", "--clusterrole=view", "--user=bob"); code != 0 {
		t.Fatalf("create rolebinding: %s", out)
	}
	waitOutput(t, bob, "yes", "auth", "can-i", "list", "pods")
	out, code = bob("auth", "can-i", "--list")
	mustContain(t, "bob can-i --list after view", out, code, 0, "pods", "[get list watch]")
	out, code = admin("auth", "can-i", "--list")
	mustContain(t, "admin can-i --list", out, code, 0, "*.*", "[*]")
	out, code = bob("auth", "can-i", "list", "pods", "-n", "kube-system")
	mustContain(t, "bob can-i in kube-system", out, code, 1, "no")
}

func TestReviewsAnswerAndAreNotStored(t *testing.T) {
	a, cp := newSecureAPI(t)
	admin, bob := a.admin(), a.as("bob-token")
	const authz, authn = "/apis/authorization.k8s.io/v1", "/apis/authentication.k8s.io/v1"
	before := cp.Log.Rev()
	// st is the review's status as canonical JSON (keys sorted), for comparing with literals.
	st := func(out map[string]any) string { b, _ := json.Marshal(out["status"]); return string(b) }
	canon := func(s string) string {
		var v any
		_ = json.Unmarshal([]byte(s), &v)
		b, _ := json.Marshal(v)
		return string(b)
	}

	out := bob.mustDo(http.StatusCreated, "POST", authz+"/selfsubjectaccessreviews",
		`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"list","resource":"pods","namespace":"x"}}}`)
	if st(out) != `{"allowed":false}` || out["kind"] != "SelfSubjectAccessReview" {
		t.Errorf("bob SSAR: %v", out)
	}
	out = bob.mustDo(http.StatusCreated, "POST", authz+"/selfsubjectaccessreviews",
		`{"spec":{"nonResourceAttributes":{"verb":"get","path":"/api"}}}`)
	if st(out) != `{"allowed":true}` {
		t.Errorf("bob SSAR on /api: %v", out)
	}
	// SubjectAccessReview asks about anyone, and only the admin may ask.
	sar := `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"carol","groups":["system:masters"],"resourceAttributes":{"verb":"delete","resource":"nodes"}}}`
	if out = admin.mustDo(http.StatusCreated, "POST", authz+"/subjectaccessreviews", sar); st(out) != `{"allowed":true}` {
		t.Errorf("SAR for a master: %v", out)
	}
	refused(t, cp, bob, "POST", authz+"/subjectaccessreviews", sar, http.StatusForbidden,
		`subjectaccessreviews.authorization.k8s.io is forbidden: User "bob" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope`)
	out = admin.mustDo(http.StatusCreated, "POST", authz+"/namespaces/x/localsubjectaccessreviews",
		`{"metadata":{"namespace":"x"},"spec":{"user":"bob","resourceAttributes":{"namespace":"x","verb":"get","resource":"pods"}}}`)
	if st(out) != `{"allowed":false}` {
		t.Errorf("local SAR: %v", out)
	}
	// Bad reviews are refused naming the field.
	for _, c := range []struct{ path, body, msg string }{
		{authz + "/subjectaccessreviews", `{"spec":{"resourceAttributes":{"verb":"get","resource":"pods"}}}`, "spec.user"},
		{authz + "/subjectaccessreviews", `{"spec":{"user":"bob"}}`, "spec.resourceAttributes"},
		{authz + "/namespaces/x/localsubjectaccessreviews", `{"spec":{"user":"bob","resourceAttributes":{"namespace":"y","verb":"get","resource":"pods"}}}`, "spec.resourceAttributes.namespace"},
		{authz + "/selfsubjectaccessreviews", `{"spec":{"resourceAtributes":{}}}`, "resourceAtributes"},
		{authn + "/tokenreviews", `{"spec":{}}`, "spec.token"},
	} {
		code, out, _ := admin.do("POST", c.path, c.body)
		if (code != http.StatusUnprocessableEntity && code != http.StatusBadRequest) || !strings.Contains(fmt.Sprint(out["message"]), c.msg) {
			t.Errorf("%s %s: got %d %v, want a refusal naming %s", c.path, c.body, code, out["message"], c.msg)
		}
	}
	code, _, _ := admin.do("GET", authz+"/selfsubjectaccessreviews", "")
	if code != http.StatusMethodNotAllowed {
		t.Errorf("GET of a review resource: %d, want 405", code)
	}

	out = bob.mustDo(http.StatusCreated, "POST", authz+"/selfsubjectrulesreviews", `{"spec":{"namespace":"x"}}`)
	if s := st(out); !strings.Contains(s, `"selfsubjectreviews"`) || !strings.Contains(s, `"incomplete":false`) {
		t.Errorf("bob SSRR: %s", s)
	}
	out = bob.mustDo(http.StatusCreated, "POST", authn+"/selfsubjectreviews", `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	if s := st(out); s != canon(`{"userInfo":{"username":"bob","uid":"u2","groups":["system:authenticated"]}}`) {
		t.Errorf("bob SelfSubjectReview: %s", s)
	}
	// TokenReview asks the apiserver's own authenticators; it never echoes the token.
	out = admin.mustDo(http.StatusCreated, "POST", authn+"/tokenreviews", `{"spec":{"token":"alice-token"}}`)
	if s := st(out); s != canon(`{"authenticated":true,"user":{"username":"alice","uid":"u1","groups":["dev","system:authenticated"]},"audiences":["https://kubernetes.default.svc.cluster.local"]}`) || strings.Contains(fmt.Sprint(out), "alice-token") {
		t.Errorf("TokenReview of alice's token: %v", out)
	}
	// A static token is good for the API's audiences only.
	out = admin.mustDo(http.StatusCreated, "POST", authn+"/tokenreviews", `{"spec":{"token":"alice-token","audiences":["vault"]}}`)
	if s := st(out); strings.Contains(s, `"authenticated":true`) {
		t.Errorf("TokenReview of alice's token for vault: %s, want unauthenticated", s)
	}
	out = admin.mustDo(http.StatusCreated, "POST", authn+"/tokenreviews", `{"spec":{"token":"nobody"}}`)
	if s := st(out); s != canon(`{"user":{},"error":"invalid bearer token"}`) {
		t.Errorf("TokenReview of a bad token: %s", s)
	}
	if after := cp.Log.Rev(); after != before {
		t.Errorf("reviews moved the log from %d to %d", before, after)
	}

	// Discovery lists them as Kubernetes does.
	for path, want := range map[string][]string{
		authz:   {"selfsubjectaccessreviews", "selfsubjectrulesreviews", "subjectaccessreviews", "localsubjectaccessreviews"},
		authn:   {"selfsubjectreviews", "tokenreviews"},
		"/apis": {"authorization.k8s.io", "authentication.k8s.io"},
	} {
		out := fmt.Sprint(bob.mustDo(http.StatusOK, "GET", path, ""))
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s does not list %s: %s", path, w, out)
			}
		}
	}
}

func TestUnservedPathsAnswerKubernetesNotFound(t *testing.T) {
	a, _ := newSecureAPI(t)
	admin := a.admin()
	for _, p := range []string{"/apis/example.com/v1/widgets", "/apis/example.com/v1", "/api/v1/widgets", "/api/v1/namespaces/default/widgets/w",
		"/api/v1/namespaces/default/nodes", "/api/v1/namespaces/default/pods/p/nosuch", "/api/v2", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews/x"} {
		out := admin.mustDo(http.StatusNotFound, "GET", p, "")
		if out["message"] != "the server could not find the requested resource" || out["reason"] != "NotFound" || out["details"] != nil {
			t.Errorf("GET %s: %v", p, out)
		}
	}
}

// Over NATS the caller is its subject's identity: Impersonate-* headers in a wire request are
// judged like any other, so a node cannot become the admin by asking.
func TestImpersonationOverNATS(t *testing.T) {
	seen := &seenUsers{users: map[string]authn.User{}}
	srv, auth, _ := startSecuredAPI(t, seen)
	call := func(id identity.ID, name string, header map[string]string) apiwire.Response {
		nc, err := identity.Connect(srv, auth, id, identity.Names{})
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := apiclient.NATS{Conn: nc, Subject: id.APISubject()}.Do(ctx, apiwire.Request{Method: http.MethodPost,
			Path: "/api/v1/namespaces", ContentType: "application/json", Body: namespaceJSON(name), Header: header})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := call(identity.NodeID("node-a"), "stolen", map[string]string{"Impersonate-User": "system:admin", "Impersonate-Group": authn.GroupMasters})
	if resp.Code != http.StatusForbidden || !strings.Contains(string(resp.Body), `users \"system:admin\" is forbidden: User \"system:node:node-a\" cannot impersonate resource \"users\"`) {
		t.Errorf("node impersonating the admin: %d %s", resp.Code, resp.Body)
	}
	if u, ok := seen.get("stolen"); ok {
		t.Fatalf("the apiserver admitted a write from %+v", u)
	}
	resp = call(identity.ID{Role: identity.Admin}, "as-bob", map[string]string{"Impersonate-User": "bob", "Impersonate-Uid": "u2", "Impersonate-Extra-Scopes": "s1"})
	u, ok := seen.get("as-bob")
	if resp.Code != http.StatusCreated || !ok || u.Name != "bob" || u.UID != "u2" || fmt.Sprint(u.Groups) != "[system:authenticated]" || fmt.Sprint(u.Extra) != "map[scopes:[s1]]" {
		t.Errorf("admin as bob: %d %s, admission saw %+v", resp.Code, resp.Body, u)
	}
	resp = call(identity.ID{Role: identity.Admin}, "groups-only", map[string]string{"Impersonate-Group": "dev"})
	if resp.Code != http.StatusBadRequest || !strings.Contains(string(resp.Body), "Impersonate-User is required") {
		t.Errorf("group without user: %d %s", resp.Code, resp.Body)
	}
}

const podList = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: listed-a}
  data: {k: a}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: listed-b}
  data: {k: b}
`

func TestKubectlApplyListAndUnknownKinds(t *testing.T) {
	cp := testutil.StartControlPlane(t)
	kubectl := kubectlEnv(t, cp.URL())
	list := writeFile(t, "list.yaml", podList)
	// kubectl validates a List's items against /openapi/v2 (its v3 verifier never takes a List).
	out, err := kubectl("apply", "-f", list)
	if err != nil || !strings.Contains(out, "configmap/listed-a created") || !strings.Contains(out, "configmap/listed-b created") {
		t.Fatalf("apply of a List: %v\n%s", err, out)
	}
	out, err = kubectl("apply", "-f", writeFile(t, "list2.yaml", strings.ReplaceAll(podList, "{k: b}", "{k: c}")))
	if err != nil || !strings.Contains(out, "configmap/listed-a unchanged") || !strings.Contains(out, "configmap/listed-b configured") {
		t.Fatalf("second apply of the List: %v\n%s", err, out)
	}
	if out, err = kubectl("get", "cm", "listed-b", "-o", "jsonpath={.data.k}"); err != nil || out != "c" {
		t.Fatalf("listed-b after the second apply: %v %q", err, out)
	}
	out, err = kubectl("apply", "-f", writeFile(t, "widget.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"))
	if err == nil || !strings.Contains(out, `no matches for kind "Widget" in version "example.com/v1"`) || !strings.Contains(out, "ensure CRDs are installed first") {
		t.Fatalf("apply of an unknown kind: %v\n%s", err, out)
	}
	out, err = kubectl("get", "--raw", "/apis/example.com/v1/widgets")
	if err == nil || !strings.Contains(out, "Error from server (NotFound): the server could not find the requested resource") {
		t.Fatalf("get --raw of an unserved resource: %v\n%s", err, out)
	}
	out, err = kubectl("get", "widgets")
	if err == nil || !strings.Contains(out, `the server doesn't have a resource type "widgets"`) {
		t.Fatalf("get of an unserved resource: %v\n%s", err, out)
	}
	// The server takes no List: there is no lists resource, and a List is not a Pod.
	a := api{t: t, base: cp.URL(), c: http.DefaultClient}
	before := cp.Log.Rev()
	listJSON := `{"apiVersion":"v1","kind":"List","items":[]}`
	if code, out, _ := a.send("POST", "/api/v1/namespaces/default/lists", "application/json", listJSON); code != http.StatusNotFound ||
		out["message"] != "the server could not find the requested resource" {
		t.Errorf("POST of a List to lists: %d %v", code, out)
	}
	if code, out, _ := a.send("POST", "/api/v1/namespaces/default/configmaps", "application/json", listJSON); code != http.StatusBadRequest ||
		!strings.Contains(fmt.Sprint(out["message"]), "List") {
		t.Errorf("POST of a List to configmaps: %d %v", code, out)
	}
	if cp.Log.Rev() != before {
		t.Errorf("a refused List moved the log")
	}
}

func TestWarningHeadersForDroppedFields(t *testing.T) {
	cp := testutil.StartControlPlane(t)
	kubectl := kubectlEnv(t, cp.URL())
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: warned, labelz: {a: b}}\ndata: {k: v}\nextra: 1\n"
	out, err := kubectl("create", "--validate=warn", "-f", writeFile(t, "cm.yaml", cm))
	if err != nil || !strings.Contains(out, `Warning: unknown field "extra"`) || !strings.Contains(out, `Warning: unknown field "metadata.labelz"`) ||
		!strings.Contains(out, "configmap/warned created") {
		t.Fatalf("create --validate=warn: %v\n%s", err, out)
	}
	// The default (no fieldValidation) is Warn, duplicates included; Ignore sends none.
	a := api{t: t, base: cp.URL(), c: http.DefaultClient}
	const path = "/api/v1/namespaces/default/configmaps"
	dup := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"first","name":"dup"},"data":{"k":"v"},"datas":{}}`
	code, obj, h := a.send("POST", path, "application/json", dup)
	want := []string{`299 - "duplicate field \"metadata.name\""`, `299 - "unknown field \"datas\""`}
	if code != http.StatusCreated || get(obj, "metadata", "name") != "dup" || fmt.Sprint(h.Values("Warning")) != fmt.Sprint(want) {
		t.Errorf("POST with a duplicate field: %d %v, Warning %q, want %q", code, get(obj, "metadata", "name"), h.Values("Warning"), want)
	}
	code, _, h = a.send("POST", path+"?fieldValidation=Ignore", "application/json", strings.ReplaceAll(dup, "dup", "quiet"))
	if code != http.StatusCreated || len(h.Values("Warning")) != 0 {
		t.Errorf("fieldValidation=Ignore: %d, Warning %q", code, h.Values("Warning"))
	}
	before := cp.Log.Rev()
	code, obj, _ = a.send("POST", path+"?fieldValidation=Loose", "application/json", strings.ReplaceAll(dup, "dup", "loose"))
	if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(obj["message"]), `fieldValidation: Unsupported value: "Loose"`) || cp.Log.Rev() != before {
		t.Errorf("fieldValidation=Loose: %d %v", code, obj["message"])
	}
}
