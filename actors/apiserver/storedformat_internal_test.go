package apiserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// A log written by an older Skiff holds JSON values: they are served (get, list, the node
// index), and an object's next write stores it as protobuf, as every new write is.
func TestJSONValuesOfAnOlderSkiffServeAndAreRewrittenAsProtobuf(t *testing.T) {
	s, hs, l := newTestServer(t, statelog.Config{})
	k, _ := schemas.ByResource("", "v1", "pods")
	ctx := context.Background()
	stored := func(name string) []byte {
		t.Helper()
		e, err := l.Get(ctx, schemas.StorageKey(k, "default", name), statelog.ReadOptions{Consistent: true})
		if err != nil {
			t.Fatal(err)
		}
		return e.Value
	}

	call(t, "POST", hs.URL+podsPath+"?fieldManager=test", podBody("new", "1"), 201)
	if v := stored("new"); !schemas.IsProtobuf(v) {
		t.Fatalf("a created pod is stored as %q", v)
	}

	// What an older Skiff stored: the object's JSON, resourceVersion left out.
	pod, err := decodeStored(k, stored("new"), 1)
	if err != nil {
		t.Fatal(err)
	}
	p := pod.(*corev1.Pod)
	p.Name, p.UID, p.ResourceVersion = "old", "3c1d7a52-0d1e-4e8f-9a4b-5c6d7e8f9a0b", ""
	p.CreationTimestamp = metav1.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p.Spec.NodeName, p.Status.PodIP = "n1", "10.0.0.9"
	old, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Create(ctx, schemas.StorageKey(k, "default", "old"), old, nil); err != nil {
		t.Fatal(err)
	}
	got := call(t, "GET", hs.URL+podsPath+"/old", "", 200)
	if status, _ := got["status"].(map[string]any); status["podIP"] != "10.0.0.9" || got["metadata"].(map[string]any)["uid"] != "3c1d7a52-0d1e-4e8f-9a4b-5c6d7e8f9a0b" {
		t.Fatalf("the JSON value serves %v", got)
	}
	list := call(t, "GET", hs.URL+podsPath+"?fieldSelector=spec.nodeName%3Dn1", "", 200)
	if items, _ := list["items"].([]any); len(items) != 1 || items[0].(map[string]any)["metadata"].(map[string]any)["name"] != "old" {
		t.Fatalf("the node's pods: %v", list["items"])
	}

	got["metadata"].(map[string]any)["labels"].(map[string]any)["w"] = "2"
	body, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	patched := call(t, "PUT", hs.URL+podsPath+"/old?fieldManager=test", string(body), 200)
	if labels := patched["metadata"].(map[string]any)["labels"].(map[string]any); labels["v"] != "1" || labels["w"] != "2" {
		t.Fatalf("patched labels %v", labels)
	}
	v := stored("old")
	if !schemas.IsProtobuf(v) {
		t.Fatalf("the pod's next write stored %q", v)
	}
	obj, err := s.DecodeShared(k, v, 1<<40) // a revision of its own: not the cache's entry of another value
	if err != nil {
		t.Fatal(err)
	}
	if m := mustMeta(obj); m.GetLabels()["w"] != "2" || string(m.GetUID()) != "3c1d7a52-0d1e-4e8f-9a4b-5c6d7e8f9a0b" || !strings.HasPrefix(m.GetCreationTimestamp().UTC().String(), "2026-01-02 03:04:05") {
		t.Fatalf("rewritten as %v", m)
	}
}
