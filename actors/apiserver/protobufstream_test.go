package apiserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

const protobufWatchType = protobufType + ";stream=watch"

// protobufClient is a clientset configured as Kubernetes' components and clusterloader2
// configure theirs, recording the Content-Type of every answer.
func protobufClient(t *testing.T, host string) (*kubernetes.Clientset, *contentTypes) {
	t.Helper()
	rec := &contentTypes{}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: host, ContentConfig: rest.ContentConfig{ContentType: protobufType},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec }})
	if err != nil {
		t.Fatal(err)
	}
	return cs, rec
}

// allProtobuf fails unless every answer seen was protobuf (watches as protobuf streams).
func allProtobuf(t *testing.T, rec *contentTypes) {
	t.Helper()
	seen := rec.take()
	if len(seen) == 0 {
		t.Fatal("no answers recorded")
	}
	for _, s := range seen {
		if !strings.HasSuffix(s, " "+protobufType) && !strings.HasSuffix(s, " "+protobufWatchType) {
			t.Errorf("an answer not in protobuf: %s", s)
		}
	}
}

// A protobuf list is paged as a JSON one: limit, continue, remainingItemCount and one
// resourceVersion for every page.
func TestClientGoProtobufListPages(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	cs, rec := protobufClient(t, cp.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pods := cs.CoreV1().Pods("default")
	var want []string
	for i := range 5 {
		name := fmt.Sprintf("p%d", i)
		if _, err := pods.Create(ctx, newPod(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	var got []string
	opts := metav1.ListOptions{Limit: 2}
	var rv string
	for page := 0; ; page++ {
		l, err := pods.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 0 || len(l.Items) > 2 || l.ResourceVersion == "" || (rv != "" && l.ResourceVersion != rv) {
			t.Fatalf("page %d: %d items at revision %q (first page's %q)", page, len(l.Items), l.ResourceVersion, rv)
		}
		rv = l.ResourceVersion
		for _, p := range l.Items {
			if p.Spec.Containers[0].Image != "skiff.local/httpecho:v1" || p.UID == "" {
				t.Fatalf("page %d: item decoded without its spec or metadata: %+v", page, p)
			}
			got = append(got, p.Name)
		}
		left := int64(len(want) - len(got))
		if l.Continue == "" {
			if left != 0 {
				t.Fatalf("no continue token with %d pods left", left)
			}
			break
		}
		if l.RemainingItemCount == nil || *l.RemainingItemCount != left {
			t.Fatalf("page %d: remainingItemCount %v, want %d", page, l.RemainingItemCount, left)
		}
		opts.Continue = l.Continue
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages listed %v, want %v", got, want)
	}
	allProtobuf(t, rec)
}

// nextEvent is the watch's next event, failing after 10 s.
func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event in 10s")
	}
	return watch.Event{}
}

// A protobuf watch delivers ADDED, MODIFIED and DELETED with the objects as written, and a
// WatchList (sendInitialEvents) its initial objects and the bookmark that ends them.
func TestClientGoProtobufWatch(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	cs, rec := protobufClient(t, cp.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pods := cs.CoreV1().Pods("default")
	l, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	created, err := pods.Create(ctx, newPod("w"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Labels["v"] = "2"
	updated, err := pods.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		typ   watch.EventType
		rv, v string
	}{{watch.Added, created.ResourceVersion, ""}, {watch.Modified, updated.ResourceVersion, "2"}, {watch.Deleted, "", "2"}} {
		ev := nextEvent(t, w)
		p, ok := ev.Object.(*corev1.Pod)
		if ev.Type != want.typ || !ok || p.Name != "w" || p.Labels["v"] != want.v || p.UID != created.UID ||
			(want.rv != "" && p.ResourceVersion != want.rv) || p.Spec.Containers[0].Image != "skiff.local/httpecho:v1" {
			t.Fatalf("want %s of w at %s (v=%q), got %s %#v", want.typ, want.rv, want.v, ev.Type, ev.Object)
		}
	}

	wl, err := pods.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Stop()
	if _, err := pods.Create(ctx, newPod("initial"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		ev := nextEvent(t, wl)
		if ev.Type == watch.Added {
			continue // "initial", whether in the initial events or after them
		}
		p, ok := ev.Object.(*corev1.Pod)
		if ev.Type != watch.Bookmark || !ok || p.ResourceVersion == "" || p.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
			t.Fatalf("want the initial-events-end bookmark, got %s %#v", ev.Type, ev.Object)
		}
		break
	}
	allProtobuf(t, rec)
}

// An informer of a protobuf clientset lists, watches and follows changes, every answer in
// protobuf.
func TestClientGoProtobufInformer(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	cs, rec := protobufClient(t, cp.URL())
	informerFollowsPods(t, cs)
	allProtobuf(t, rec)
}

// The Accept client-go sends for a custom resource, and one taking protobuf only.
const (
	acceptProtobufOrJSON = protobufType + ", application/json"
	acceptOnlyProtobuf   = protobufType
)

// getWith sends a GET with the given Accept and returns the status, Content-Type and, of a
// watch, the first line only.
func getWith(t *testing.T, url, accept string) (int, string, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body []byte
	if strings.Contains(url, "watch=") && resp.StatusCode == 200 {
		body, err = bufio.NewReader(resp.Body).ReadBytes('\n')
	} else {
		body, err = io.ReadAll(resp.Body)
	}
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

// A custom resource has no protobuf: asked for protobuf or JSON it answers JSON (an object, a
// list, a watch), asked for protobuf only it is 406 Not Acceptable, as kube-apiserver answers.
func TestCustomResourceProtobufAcceptFallsBackToJSON(t *testing.T) {
	a, _ := newAPI(t)
	createWidgetCRD(t, a)
	a.mustDo(201, "POST", widgetsPath, "application/json", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"color":"red"}}`)
	for _, path := range []string{widgetsPath + "/w1", widgetsPath, widgetsPath + "?watch=true&resourceVersion=0&timeoutSeconds=5"} {
		code, ct, body := getWith(t, a.base+path, acceptProtobufOrJSON)
		var out map[string]any
		if code != 200 || ct != "application/json" || json.Unmarshal(body, &out) != nil || !strings.Contains(string(body), `"w1"`) {
			t.Errorf("GET %s with protobuf or JSON: %d %s %s", path, code, ct, body)
		}
		code, _, body = getWith(t, a.base+path, acceptOnlyProtobuf)
		if code != http.StatusNotAcceptable || json.Unmarshal(body, &out) != nil || out["reason"] != "NotAcceptable" ||
			!strings.Contains(out["message"].(string), "application/json") {
			t.Errorf("GET %s with protobuf only: want 406 naming JSON, got %d %s", path, code, body)
		}
	}
	// Pods have protobuf: the same Accept gets it.
	if code, ct, _ := getWith(t, a.base+podsPath, acceptOnlyProtobuf); code != 200 || ct != protobufType {
		t.Errorf("pods with protobuf only: %d %s", code, ct)
	}
}
