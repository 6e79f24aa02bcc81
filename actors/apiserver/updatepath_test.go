package apiserver

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/skiff-sh/skiff/bus/statelog"
)

// A PUT or status PUT that changes nothing in the stored form writes nothing: the answer
// carries the stored revision, and no new revision exists.
func TestUnchangedUpdatesWriteNothing(t *testing.T) {
	_, hs, l := newTestServer(t, statelog.Config{})
	base := hs.URL + "/api/v1/namespaces/default/configmaps"
	created := call(t, http.MethodPost, base, `{"metadata":{"name":"c","labels":{"a":"1"}},"data":{"k":"v"}}`, http.StatusCreated)
	body, _ := json.Marshal(created)
	before := l.Rev()
	again := call(t, http.MethodPut, base+"/c", string(body), http.StatusOK)
	if rvOf(again) != rvOf(created) || l.Rev() != before {
		t.Fatalf("an unchanged PUT wrote: revision %s -> %s, log %d -> %d", rvOf(created), rvOf(again), before, l.Rev())
	}
	changed := call(t, http.MethodPut, base+"/c", `{"metadata":{"name":"c","labels":{"a":"2"}},"data":{"k":"v"}}`, http.StatusOK)
	if rvOf(changed) == rvOf(created) {
		t.Fatal("a changed PUT kept the revision")
	}

	pods := hs.URL + "/api/v1/namespaces/default/pods"
	pod := call(t, http.MethodPost, pods, `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"img"}]}}`, http.StatusCreated)
	pod["status"] = map[string]any{"phase": "Running", "podIP": "10.0.0.5"}
	body, _ = json.Marshal(pod)
	running := call(t, http.MethodPut, pods+"/p/status", string(body), http.StatusOK)
	if rvOf(running) == rvOf(pod) {
		t.Fatal("a status write kept the revision")
	}
	before = l.Rev()
	body, _ = json.Marshal(running)
	same := call(t, http.MethodPut, pods+"/p/status", string(body), http.StatusOK)
	if rvOf(same) != rvOf(running) || l.Rev() != before {
		t.Fatalf("an unchanged status write wrote: revision %s -> %s", rvOf(running), rvOf(same))
	}
	st, _ := same["status"].(map[string]any)
	if st["podIP"] != "10.0.0.5" {
		t.Fatalf("status after an unchanged write: %v", st)
	}
}
