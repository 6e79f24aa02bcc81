package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// The check finds a shared decode changed after it was read, on its next reuse and when asked.
func TestSharedCheckFindsAChangedDecode(t *testing.T) {
	s, hs, _ := newTestServer(t, statelog.Config{})
	s.shared = newSharedCheck() // before any read
	call(t, http.MethodPost, hs.URL+"/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"c"},"data":{"k":"v"}}`, http.StatusCreated)
	k, _ := schemas.ByResource("", "v1", "configmaps")
	read := func() *corev1.ConfigMap {
		obj, _, err := s.readEntry(context.Background(), k, "default", "c", statelog.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*corev1.ConfigMap)
	}
	cm := read()
	if again := read(); again != cm {
		t.Fatal("two reads of one revision did not share its decode")
	}
	if err := s.SharedMutations(); err != nil {
		t.Fatalf("a decode nobody changed reported: %v", err)
	}
	cm.Data["k"] = "changed by a writer" // what an update must never do
	read()
	err := s.SharedMutations()
	if err == nil || !strings.Contains(err.Error(), schemas.StorageKey(k, "default", "c")) || !strings.Contains(err.Error(), "changed by a writer") {
		t.Fatalf("a changed shared decode not reported with its key and change: %v", err)
	}
}

// Every kind of write that starts from the stored object (update, status update, the patch
// types, apply, binding, the finalizer removal that completes a delete, no-op writes) leaves
// the shared decode as decoded, while a watcher encodes the same objects.
func TestWritesLeaveTheSharedDecodeUnchanged(t *testing.T) {
	s, hs, _ := newTestServer(t, statelog.Config{})
	s.shared = newSharedCheck()
	pods := hs.URL + "/api/v1/namespaces/default/pods"
	lines := watchLines(t, pods+"?watch=true")
	call(t, http.MethodPost, pods, `{"metadata":{"name":"p","labels":{"a":"1"},"finalizers":["example.com/hold"]},"spec":{"containers":[{"name":"c","image":"img","resources":{"requests":{"cpu":"100m"}}}]}}`, http.StatusCreated)
	writes := []struct{ method, path, ct, body string }{
		{http.MethodPatch, "/p", "application/merge-patch+json", `{"metadata":{"labels":{"a":"2"}}}`},
		{http.MethodPatch, "/p", "application/json-patch+json", `[{"op":"add","path":"/metadata/labels/b","value":"x"}]`},
		{http.MethodPatch, "/p", "application/strategic-merge-patch+json", `{"metadata":{"annotations":{"n":"1"}}}`},
		{http.MethodPatch, "/p?fieldManager=t", "application/apply-patch+yaml", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"c":"y"}}}`},
		{http.MethodPost, "/p/binding", "application/json", `{"metadata":{"name":"p"},"target":{"kind":"Node","name":"n1"}}`},
		{http.MethodPatch, "/p/status", "application/merge-patch+json", `{"status":{"phase":"Running","podIP":"10.0.0.5"}}`},
		{http.MethodPatch, "/p/status", "application/merge-patch+json", `{"status":{"phase":"Running","podIP":"10.0.0.5"}}`}, // no-op
		{http.MethodPatch, "/p", "application/merge-patch+json", `{"metadata":{"labels":{"a":"2"}}}`},                        // no-op
		{http.MethodDelete, "/p", "", ""},
	}
	for _, w := range writes {
		req, _ := http.NewRequest(w.method, pods+w.path, strings.NewReader(w.body))
		req.Header.Set("Content-Type", w.ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d", w.method, w.path, resp.StatusCode)
		}
	}
	// PUTs of the object and its status as last answered, then the finalizer's removal.
	cur := call(t, http.MethodGet, pods+"/p", "", http.StatusOK)
	cur["status"].(map[string]any)["message"] = "m"
	body, _ := json.Marshal(cur)
	cur = call(t, http.MethodPut, pods+"/p/status", string(body), http.StatusOK)
	cur["metadata"].(map[string]any)["finalizers"] = nil
	body, _ = json.Marshal(cur)
	call(t, http.MethodPut, pods+"/p", string(body), http.StatusOK)
	lines(len(writes) + 3 - 2) // the two no-ops write nothing; the last PUT deletes
	if code, _, _ := do(http.MethodGet, pods+"/p", ""); code != http.StatusNotFound {
		t.Fatalf("the pod is still there after its last finalizer went: %d", code)
	}
	if n := len(s.shared.pristine); n < len(writes) {
		t.Fatalf("the writes read %d shared decodes, want at least %d", n, len(writes))
	}
	if err := s.SharedMutations(); err != nil {
		t.Fatal(err)
	}
}
