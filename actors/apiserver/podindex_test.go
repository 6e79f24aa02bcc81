package apiserver

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// A pod list with fieldSelector=spec.nodeName is answered from the pods-by-node index: only
// that node's pods, including one bound or created just before the list (a consistent read
// waits for the index to reach the log), and never one moved off the node or deleted.
func TestPodListByNodeIsServedFromTheIndex(t *testing.T) {
	s, hs, l := newTestServer(t, statelog.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.pods.run(ctx, l) }()
	t.Cleanup(func() { cancel(); <-done })
	pod := func(name, node string) string {
		return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q},"spec":{"nodeName":%q,"containers":[{"name":"c","image":"i"}]}}`, name, node)
	}
	for name, node := range map[string]string{"a1": "node-a", "b1": "node-b", "b2": "node-b", "free": ""} {
		call(t, "POST", hs.URL+"/api/v1/namespaces/default/pods", pod(name, node), 201)
	}
	list := func() string {
		t.Helper()
		r := httptest.NewRequest("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a", nil)
		info, ok := parseRequest(r)
		if !ok {
			t.Fatal("bad request path")
		}
		sel, err := parseSelectors(info)
		if err != nil {
			t.Fatal(err)
		}
		kind, _ := schemas.ByResource("", "v1", "pods")
		at, err := listReadAt(info)
		if err != nil {
			t.Fatal(err)
		}
		objs, _, fromIndex, err := s.listByNode(context.Background(), kind, info, sel, at)
		if err != nil || !fromIndex {
			t.Fatalf("listByNode: from index %v, %v", fromIndex, err)
		}
		var names []string
		for _, o := range objs {
			names = append(names, mustMeta(o).GetName())
		}
		sort.Strings(names)
		// The HTTP answer is the same list.
		out := call(t, "GET", hs.URL+"/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a", "", 200)
		if items, _ := out["items"].([]any); len(items) != len(names) {
			t.Fatalf("HTTP list has %d items, index %v", len(items), names)
		}
		return strings.Join(names, ",")
	}
	// Nothing builds the index until a list by node asks for it; that first list is answered
	// the usual way.
	time.Sleep(50 * time.Millisecond) // time for a build that should not have started
	if s.pods.isSynced() {
		t.Fatal("the index was built before any list by node asked for it")
	}
	if out := call(t, "GET", hs.URL+"/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a", "", 200); len(out["items"].([]any)) != 1 {
		t.Fatalf("first list by node (before the index): %v", out["items"])
	}
	deadline := time.Now().Add(10 * time.Second)
	for !s.pods.isSynced() {
		if time.Now().After(deadline) {
			t.Fatal("index never synced")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := list(); got != "a1" {
		t.Fatalf("list %s, want a1", got)
	}
	call(t, "POST", hs.URL+"/api/v1/namespaces/default/pods", pod("a2", "node-a"), 201)
	call(t, "POST", hs.URL+"/api/v1/namespaces/default/pods/free/binding",
		`{"apiVersion":"v1","kind":"Binding","metadata":{"name":"free"},"target":{"kind":"Node","name":"node-a"}}`, 201)
	if got := list(); got != "a1,a2,free" {
		t.Fatalf("list right after a create and a bind: %s, want a1,a2,free", got)
	}
	call(t, "DELETE", hs.URL+"/api/v1/namespaces/default/pods/a1?gracePeriodSeconds=0", "", 200)
	if got := list(); got != "a2,free" {
		t.Fatalf("list after a delete: %s, want a2,free", got)
	}
}
