package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// api is a tiny raw HTTP client: these tests look at exact status codes and bodies.
type api struct {
	t     *testing.T
	base  string
	c     *http.Client // nil = http.DefaultClient
	token string       // bearer token; "" = none
}

func (a api) do(method, path, contentType, body string) (int, map[string]any) {
	a.t.Helper()
	code, out, _ := a.send(method, path, contentType, body)
	return code, out
}

func (a api) send(method, path, contentType, body string) (int, map[string]any, http.Header) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	c := a.c
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return resp.StatusCode, out, resp.Header
}

func (a api) mustDo(want int, method, path, contentType, body string) map[string]any {
	a.t.Helper()
	code, out := a.do(method, path, contentType, body)
	if code != want {
		a.t.Fatalf("%s %s: want %d, got %d: %v", method, path, want, code, out)
	}
	return out
}

func get(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

// apiOnly runs the apiserver alone, so no other actor writes while a test looks at exact revisions.
func apiOnly(c *controlplane.Config) { c.Components = []string{"apiserver"} }

func newAPI(t *testing.T) (api, *controlplane.ControlPlane) {
	cp := testutil.StartControlPlane(t, apiOnly)
	return api{t: t, base: cp.URL()}, cp
}

const podsPath = "/api/v1/namespaces/default/pods"

func podJSON(name string, extra string) string {
	return `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `"` + extra + `},"spec":{"containers":[{"name":"c","image":"img"}]}}`
}

func TestCreateSetsMetadataAndGetReturnsIt(t *testing.T) {
	a, _ := newAPI(t)
	out := a.mustDo(201, "POST", podsPath, "application/json", podJSON("p", ""))
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp"} {
		if get(out, "metadata", f) == nil {
			t.Errorf("metadata.%s not set: %v", f, out["metadata"])
		}
	}
	if get(out, "status", "phase") != "Pending" {
		t.Errorf("a new pod is Pending, got %v", get(out, "status"))
	}
	again := a.mustDo(200, "GET", podsPath+"/p", "", "")
	if get(again, "metadata", "resourceVersion") != get(out, "metadata", "resourceVersion") {
		t.Errorf("GET returns another revision than the create: %v vs %v", again["metadata"], out["metadata"])
	}
	st := a.mustDo(409, "POST", podsPath, "application/json", podJSON("p", ""))
	if st["reason"] != "AlreadyExists" {
		t.Errorf("duplicate create: %v", st)
	}
	gen := a.mustDo(201, "POST", podsPath, "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"web-"},"spec":{"containers":[{"name":"c","image":"img"}]}}`)
	if name, _ := get(gen, "metadata", "name").(string); !strings.HasPrefix(name, "web-") || len(name) != len("web-")+5 {
		t.Errorf("generateName gave %q", name)
	}
}

func TestBadInputIsRefusedWithTheFieldAndWritesNothing(t *testing.T) {
	a, cp := newAPI(t)
	cases := []struct {
		name, path, ct, body string
		code                 int
		mention              string
	}{
		{"malformed JSON", podsPath, "application/json", `{"apiVersion":"v1","kind":"Pod",`, 400, ""},
		{"unknown field (strict)", podsPath + "?fieldValidation=Strict", "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containerz":[]}}`, 400, "containerz"},
		{"missing image", podsPath, "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c"}]}}`, 422, "spec.containers[0].image"},
		{"invalid name", podsPath, "application/json", podJSON("Bad_Name", ""), 422, "metadata.name"},
		{"wrong kind for the path", podsPath, "application/json", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"x"}}`, 400, "Service"},
		{"namespace mismatch", podsPath, "application/json", podJSON("x", `,"namespace":"other"`), 400, "namespace"},
		{"missing namespace", "/api/v1/namespaces/nope/pods", "application/json", podJSON("x", ""), 404, "nope"},
		{"unknown resource", "/api/v1/namespaces/default/gizmos", "application/json", `{}`, 404, "the server could not find the requested resource"},
		{"oversized body", podsPath, "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","annotations":{"a":"` + strings.Repeat("x", 4<<20) + `"}}}`, 413, ""},
		{"negative replicas", "/apis/apps/v1/namespaces/default/deployments", "application/json", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"},"spec":{"replicas":-1,"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}`, 422, "spec.replicas"},
		{"selector does not match template", "/apis/apps/v1/namespaces/default/deployments", "application/json", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"c"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}`, 422, "spec.template.metadata.labels"},
		{"port out of range", "/api/v1/namespaces/default/services", "application/json", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"x"},"spec":{"ports":[{"port":70000}]}}`, 422, "spec.ports[0].port"},
	}
	before := cp.Log.Rev()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out := a.do("POST", c.path, c.ct, c.body)
			if code != c.code {
				t.Fatalf("want %d, got %d: %v", c.code, code, out)
			}
			if out["kind"] != "Status" {
				t.Fatalf("error body is not a metav1.Status: %v", out)
			}
			msg := fmt.Sprint(out["message"], out["details"])
			if c.mention != "" && !strings.Contains(msg, c.mention) {
				t.Fatalf("error does not name %q: %s", c.mention, msg)
			}
		})
	}
	if after := cp.Log.Rev(); after != before {
		t.Fatalf("refused requests wrote to the log: revision %d -> %d", before, after)
	}
}

// A pods/status write is checked by the status rules (as kube's ValidatePodStatusUpdate): a
// bad pod IP is refused naming the field, and nothing is written.
func TestPodStatusWriteIsValidated(t *testing.T) {
	a, cp := newAPI(t)
	a.mustDo(201, "POST", podsPath, "application/json", podJSON("s", ""))
	before := cp.Log.Rev()
	out := a.mustDo(422, "PUT", podsPath+"/s/status", "application/json",
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"s"},"status":{"phase":"Running","podIP":"10.0.0.300","podIPs":[{"ip":"10.0.0.300"}]}}`)
	if msg := fmt.Sprint(out["message"], out["details"]); !strings.Contains(msg, "status.podIPs[0].ip") {
		t.Errorf("the refusal does not name status.podIPs[0].ip: %s", msg)
	}
	if after := cp.Log.Rev(); after != before {
		t.Errorf("a refused status write wrote to the log: revision %d -> %d", before, after)
	}
	a.mustDo(200, "PUT", podsPath+"/s/status", "application/json",
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"s"},"status":{"phase":"Running","podIP":"10.0.0.9","podIPs":[{"ip":"10.0.0.9"}]}}`)
}

func TestUpdateConflictsOnStaleRevisionAndBumpsGeneration(t *testing.T) {
	a, _ := newAPI(t)
	path := "/apis/apps/v1/namespaces/default/deployments"
	d := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"%s},"spec":{"replicas":%d,"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}`
	created := a.mustDo(201, "POST", path, "application/json", fmt.Sprintf(d, "", 1))
	rv := get(created, "metadata", "resourceVersion").(string)
	upd := a.mustDo(200, "PUT", path+"/d", "application/json", fmt.Sprintf(d, `,"resourceVersion":"`+rv+`"`, 3))
	if get(upd, "metadata", "generation") != float64(2) {
		t.Errorf("a spec change bumps generation: %v", upd["metadata"])
	}
	st := a.mustDo(409, "PUT", path+"/d", "application/json", fmt.Sprintf(d, `,"resourceVersion":"`+rv+`"`, 4))
	if st["reason"] != "Conflict" {
		t.Errorf("stale update: %v", st)
	}
	// A status write changes status only and leaves generation alone.
	status := a.mustDo(200, "PUT", path+"/d/status", "application/json", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":9},"status":{"replicas":3}}`)
	if get(status, "status", "replicas") != float64(3) || get(status, "spec", "replicas") != float64(3) || get(status, "metadata", "generation") != float64(2) {
		t.Errorf("status update: %v %v %v", status["spec"], status["status"], status["metadata"])
	}
	// And the main resource cannot change status.
	main := a.mustDo(200, "PATCH", path+"/d", "application/merge-patch+json", `{"status":{"replicas":7},"metadata":{"labels":{"x":"y"}}}`)
	if get(main, "status", "replicas") != float64(3) || get(main, "metadata", "labels", "x") != "y" {
		t.Errorf("merge patch on the main resource: %v %v", main["status"], main["metadata"])
	}
}

func TestPatchTypes(t *testing.T) {
	a, _ := newAPI(t)
	a.mustDo(201, "POST", podsPath, "application/json", podJSON("p", `,"labels":{"a":"1"}`))
	out := a.mustDo(200, "PATCH", podsPath+"/p", "application/json-patch+json", `[{"op":"add","path":"/metadata/labels/b","value":"2"}]`)
	if get(out, "metadata", "labels", "b") != "2" || get(out, "metadata", "labels", "a") != "1" {
		t.Errorf("json patch: %v", out["metadata"])
	}
	out = a.mustDo(200, "PATCH", podsPath+"/p", "application/strategic-merge-patch+json", `{"spec":{"containers":[{"name":"c","image":"img2"}]}}`)
	cs := get(out, "spec", "containers").([]any)
	if len(cs) != 1 || cs[0].(map[string]any)["image"] != "img2" {
		t.Errorf("strategic merge by container name: %v", cs)
	}
	a.mustDo(415, "PATCH", podsPath+"/p", "text/plain", `x`)
	a.mustDo(409, "PATCH", podsPath+"/p", "application/merge-patch+json", `{"metadata":{"resourceVersion":"1"}}`)
}

func TestFinalizersAndGracefulDeletion(t *testing.T) {
	a, _ := newAPI(t)
	a.mustDo(201, "POST", podsPath, "application/json", podJSON("f", `,"finalizers":["example.com/hold"]`))
	out := a.mustDo(200, "DELETE", podsPath+"/f", "", "")
	if get(out, "metadata", "deletionTimestamp") == nil {
		t.Fatalf("an object with finalizers gets a deletionTimestamp: %v", out["metadata"])
	}
	a.mustDo(200, "GET", podsPath+"/f", "", "")
	a.mustDo(422, "PATCH", podsPath+"/f", "application/merge-patch+json", `{"metadata":{"finalizers":["example.com/hold","example.com/new"]}}`)
	a.mustDo(200, "PATCH", podsPath+"/f", "application/merge-patch+json", `{"metadata":{"finalizers":null}}`)
	a.mustDo(404, "GET", podsPath+"/f", "", "")

	// A pod bound to a node is deleted gracefully: the kubelet finishes the delete.
	a.mustDo(201, "POST", podsPath, "application/json", podJSON("g", ""))
	a.mustDo(201, "POST", podsPath+"/g/binding", "application/json", `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"g"},"target":{"kind":"Node","name":"n1"}}`)
	a.mustDo(409, "POST", podsPath+"/g/binding", "application/json", `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"g"},"target":{"kind":"Node","name":"n2"}}`)
	out = a.mustDo(200, "DELETE", podsPath+"/g", "", "")
	if get(out, "metadata", "deletionGracePeriodSeconds") != float64(30) {
		t.Fatalf("bound pod: want a 30s grace period, got %v", out["metadata"])
	}
	a.mustDo(200, "GET", podsPath+"/g", "", "")
	a.mustDo(200, "DELETE", podsPath+"/g?gracePeriodSeconds=0", "", "")
	a.mustDo(404, "GET", podsPath+"/g", "", "")
}

func TestNamespaceDeletionRemovesContent(t *testing.T) {
	a, _ := newAPI(t)
	a.mustDo(201, "POST", "/api/v1/namespaces", "application/json", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team"}}`)
	a.mustDo(201, "POST", "/api/v1/namespaces/team/pods", "application/json", podJSON("p", ""))
	a.mustDo(201, "POST", "/api/v1/namespaces/team/configmaps", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}}`)
	a.mustDo(200, "DELETE", "/api/v1/namespaces/team", "", "")
	a.mustDo(404, "GET", "/api/v1/namespaces/team/pods/p", "", "")
	a.mustDo(404, "GET", "/api/v1/namespaces/team", "", "")
}

func TestListSelectors(t *testing.T) {
	a, _ := newAPI(t)
	for i, app := range []string{"web", "web", "db"} {
		a.mustDo(201, "POST", podsPath, "application/json", podJSON(fmt.Sprintf("p%d", i), `,"labels":{"app":"`+app+`"}`))
	}
	l := a.mustDo(200, "GET", podsPath+"?labelSelector=app%3Dweb", "", "")
	if n := len(l["items"].([]any)); n != 2 {
		t.Errorf("labelSelector app=web: %d items", n)
	}
	l = a.mustDo(200, "GET", "/api/v1/pods?fieldSelector=metadata.name%3Dp2", "", "")
	if n := len(l["items"].([]any)); n != 1 {
		t.Errorf("fieldSelector over all namespaces: %d items", n)
	}
	a.mustDo(400, "GET", podsPath+"?fieldSelector=spec.bogus%3Dx", "", "")
	a.mustDo(400, "GET", podsPath+"?labelSelector=%3D%3D%3D", "", "")
}

// watchEvents opens a watch and returns a channel of "TYPE name" strings.
func watchEvents(t *testing.T, url string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 64)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			var ev struct {
				Type   string         `json:"type"`
				Object map[string]any `json:"object"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			name, _ := get(ev.Object, "metadata", "name").(string)
			if ev.Type == "ERROR" {
				name = fmt.Sprint(ev.Object["code"])
			}
			ch <- ev.Type + " " + name
		}
	}()
	return ch
}

func expectEvents(t *testing.T, ch <-chan string, want ...string) {
	t.Helper()
	for _, w := range want {
		select {
		case got, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed, wanted %q", w)
			}
			if got != w {
				t.Fatalf("want event %q, got %q", w, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event %q", w)
		}
	}
}

func TestWatchFollowsSelectorTransitions(t *testing.T) {
	a, _ := newAPI(t)
	out := a.mustDo(201, "POST", podsPath, "application/json", podJSON("a", `,"labels":{"app":"web"}`))
	rv := get(out, "metadata", "resourceVersion").(string)
	ch := watchEvents(t, a.base+podsPath+"?watch=true&labelSelector=app%3Dweb&resourceVersion="+rv)
	a.mustDo(201, "POST", podsPath, "application/json", podJSON("b", `,"labels":{"app":"db"}`))
	a.mustDo(200, "PATCH", podsPath+"/b", "application/merge-patch+json", `{"metadata":{"labels":{"app":"web"}}}`)
	a.mustDo(200, "PATCH", podsPath+"/a", "application/merge-patch+json", `{"metadata":{"labels":{"app":"db"}}}`)
	a.mustDo(200, "DELETE", podsPath+"/b", "", "")
	expectEvents(t, ch, "ADDED b", "DELETED a", "DELETED b")
}

func TestWatchFromRevisionAndInitialEvents(t *testing.T) {
	a, _ := newAPI(t)
	first := a.mustDo(201, "POST", podsPath, "application/json", podJSON("one", ""))
	rv := get(first, "metadata", "resourceVersion").(string)
	a.mustDo(201, "POST", podsPath, "application/json", podJSON("two", ""))
	a.mustDo(200, "DELETE", podsPath+"/one", "", "")
	expectEvents(t, watchEvents(t, a.base+podsPath+"?watch=1&resourceVersion="+rv), "ADDED two", "DELETED one")
	// WatchList: current state, then the bookmark that ends it.
	ch := watchEvents(t, a.base+podsPath+"?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan")
	expectEvents(t, ch, "ADDED two", "BOOKMARK ")
}

func TestWatchFromCompactedRevisionIsGone(t *testing.T) {
	a, cp := newAPI(t)
	first := a.mustDo(201, "POST", podsPath, "application/json", podJSON("p", ""))
	rv := get(first, "metadata", "resourceVersion").(string)
	for i := range 3 {
		a.mustDo(200, "PATCH", podsPath+"/p", "application/merge-patch+json", fmt.Sprintf(`{"metadata":{"labels":{"n":"%d"}}}`, i))
	}
	if err := cp.Log.Compact(context.Background(), cp.Log.Rev()); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, watchEvents(t, a.base+podsPath+"?watch=1&resourceVersion="+rv), "ERROR 410")
}

func TestDiscoveryAndOpenAPI(t *testing.T) {
	a, _ := newAPI(t)
	groups := a.mustDo(200, "GET", "/apis", "", "")
	var names []string
	for _, g := range groups["groups"].([]any) {
		names = append(names, g.(map[string]any)["name"].(string))
	}
	for _, want := range []string{"apps", "discovery.k8s.io", "coordination.k8s.io"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("group %s missing from /apis: %v", want, names)
		}
	}
	res := a.mustDo(200, "GET", "/apis/apps/v1", "", "")
	var rs []string
	for _, r := range res["resources"].([]any) {
		rs = append(rs, r.(map[string]any)["name"].(string))
	}
	if !strings.Contains(strings.Join(rs, " "), "deployments/scale") {
		t.Errorf("apps/v1 lacks deployments/scale: %v", rs)
	}
	oa := a.mustDo(200, "GET", "/openapi/v3/apis/apps/v1", "", "")
	if !bytes.Contains(mustJSON(oa), []byte("fieldValidation")) {
		t.Errorf("openapi v3 lacks the fieldValidation parameter")
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
