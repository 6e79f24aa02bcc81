package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

const podsPath = "/api/v1/namespaces/default/pods"

func podBody(name, label string) string {
	return `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `","labels":{"v":"` + label + `"}},` +
		`"spec":{"containers":[{"name":"c","image":"skiff.local/app:v1","resources":{"requests":{"cpu":"100m"}}}]}}`
}

// sharingPods is a pods informer of a factory that shares the server's decodes (with the
// mutation check on), running until the test ends.
func sharingPods(t *testing.T, s *Server, l *statelog.Log) (*informer.Factory, informer.Typed[*corev1.Pod]) {
	t.Helper()
	f := informer.NewFactory(l)
	f.CheckMutations()
	f.ShareDecodes(s)
	pods := informer.Shared[*corev1.Pod](f, "", "pods")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = pods.Informer().Run(ctx) }()
	if !pods.WaitForSync(ctx) {
		t.Fatal("pods informer not synced")
	}
	return f, pods
}

// cachedAt waits for the informer to hold name at revision rv.
func cachedAt(t *testing.T, pods informer.Typed[*corev1.Pod], name, rv string) *corev1.Pod {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		p, ok := pods.Get("default", name)
		if ok && p.ResourceVersion == rv {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("informer has %s at %v (cached %v), want %s", name, p, ok, rv)
		}
	}
}

// An informer sharing the apiserver's decodes caches the watch cache's object for a write, not
// one of its own: a top level of its own without managedFields, the rest the same memory. With
// a watcher and the informer attached, a write is decoded once (its update's read of the
// previous revision finds that one's decode too).
func TestInformerSharesTheWatchCacheDecode(t *testing.T) {
	s, hs, l := newTestServer(t, statelog.Config{})
	f, pods := sharingPods(t, s, l)
	watcher := watchLines(t, fmt.Sprintf("%s%s?watch=1&resourceVersion=%d", hs.URL, podsPath, l.Rev()))
	created := call(t, "POST", hs.URL+podsPath+"?fieldManager=test", podBody("p", "1"), 201)
	watcher(1)
	cachedAt(t, pods, "p", rvOf(created))

	decodes := s.events.decodes.Load()
	updated := call(t, "PUT", hs.URL+podsPath+"/p?fieldManager=test", podBody("p", "2"), 200)
	watcher(1)
	cached := cachedAt(t, pods, "p", rvOf(updated))
	if got := s.events.decodes.Load() - decodes; got != 1 {
		t.Fatalf("an update read, watched and cached: %d decodes, want 1", got)
	}

	shared := sharedDecodeOf(t, s, l, pods.Informer().Kind(), "p").(*corev1.Pod)
	switch {
	case shared == cached:
		t.Fatal("the informer caches the shared object itself, not a top level of its own")
	case len(shared.ManagedFields) == 0 || cached.ManagedFields != nil:
		t.Fatalf("managedFields: shared %d entries, cached %v; want the shared object's kept, the cache's dropped", len(shared.ManagedFields), cached.ManagedFields)
	case &shared.Spec.Containers[0] != &cached.Spec.Containers[0]:
		t.Fatal("the cached pod's containers are a decode of their own")
	case cached.Labels["v"] != "2" || cached.ResourceVersion != shared.ResourceVersion || cached.GroupVersionKind() != shared.GroupVersionKind():
		t.Fatalf("cached %v %s %v, shared %s %v", cached.Labels, cached.ResourceVersion, cached.GroupVersionKind(), shared.ResourceVersion, shared.GroupVersionKind())
	}
	if err := f.Mutations(); err != nil {
		t.Fatalf("nobody changed anything: %v", err)
	}
}

// The server's check covers the decodes it shares with the informers: a change by any reader
// (here, to the metadata the cache's own top level does not share) is reported there, while
// the informers' own check covers only their copies.
func TestSharedMutationsCoverTheInformersDecodes(t *testing.T) {
	s, hs, l := newTestServer(t, statelog.Config{})
	f, pods := sharingPods(t, s, l)
	created := call(t, "POST", hs.URL+podsPath+"?fieldManager=test", podBody("p", "1"), 201)
	cachedAt(t, pods, "p", rvOf(created))
	key := schemas.StorageKey(pods.Informer().Kind(), "default", "p")
	sharedDecodeOf(t, s, l, pods.Informer().Kind(), "p").(*corev1.Pod).ResourceVersion = "1" // what no reader may do
	if err := f.Mutations(); err != nil {
		t.Fatalf("the informer's cached copy was not changed, yet: %v", err)
	}
	err := s.SharedMutations()
	if err == nil || !strings.Contains(err.Error(), "shared decode of "+key) {
		t.Fatalf("a changed shared object reported as %v", err)
	}
}

// BenchmarkPodEvents is the per-event cost, in the apiserver's process, of a Pod write that a
// watcher (the watch cache) and the shared informers both read: each informer decoding alone,
// as a process without an apiserver does, or sharing the watch cache's decode. The pods are
// written straight to the log (no API request), so the difference is the readers'.
func BenchmarkPodEvents(b *testing.B) {
	for _, share := range []bool{false, true} {
		b.Run(fmt.Sprintf("shared=%v", share), func(b *testing.B) { benchPodEvents(b, share) })
	}
}

func benchPodEvents(b *testing.B, share bool) {
	s := benchServer(b)
	l := s.log
	f := informer.NewFactory(l)
	if share {
		f.ShareDecodes(s)
	}
	pods := f.For("", "pods")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = pods.Run(ctx) }()
	if !pods.WaitForSync(ctx) {
		b.Fatal("not synced")
	}
	values := stoodUpPods(b, s, 64)
	w, err := l.Watch(ctx, schemas.StoragePrefix(pods.Kind(), ""), statelog.WatchOptions{FromRev: l.Rev()})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	var watched atomic.Uint64
	go func() { // as a watch request does: each event's shared decode and JSON
		enc := &eventWriter{w: discardWriter{}, kind: pods.Kind(), now: time.Now, shared: s.events}
		all := selector{label: labels.Everything(), field: fields.Everything()}
		for ev := range w.Events() {
			enc.write(ev, all, false)
			watched.Store(ev.Rev)
		}
	}()
	keys := make([]string, 0, len(values))
	revs := map[string]uint64{}
	for key, e := range values {
		keys = append(keys, key)
		revs[key] = e.Rev
	}
	b.ReportAllocs()
	b.ResetTimer()
	before := cpuTime()
	var last uint64
	for i := 0; i < b.N; i++ {
		key := keys[i%len(keys)]
		rev, err := l.Update(ctx, key, values[key].Value, revs[key], nil)
		if err != nil {
			b.Fatal(err)
		}
		revs[key], last = rev, rev
	}
	for watched.Load() < last || pods.Rev() < last {
		select {
		case <-w.Done():
			b.Fatalf("the watch ended before the last event: %v", w.Err())
		case <-time.After(time.Millisecond):
		}
	}
	reportCPU(b, before)
}

// discardWriter is a watch response that goes nowhere.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (discardWriter) WriteHeader(int)             {}

// stoodUpPods creates and binds n pods through the API, as the control plane leaves them
// (defaulted, with managedFields), and returns their log entries by key.
func stoodUpPods(b *testing.B, s *Server, n int) map[string]statelog.Entry {
	out := map[string]statelog.Entry{}
	k, _ := schemas.ByResource("", "v1", "pods")
	for i := range n {
		name := fmt.Sprintf("web-%d", i)
		wire(b, s, http.MethodPost, podsPath+"?fieldManager=kube-controller-manager", json.RawMessage(podBody(name, "web")), nil)
		wire(b, s, http.MethodPost, podsPath+"/"+name+"/binding?fieldManager=skiff-scheduler",
			&corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}, nil)
		key := schemas.StorageKey(k, "default", name)
		e, err := s.log.Get(context.Background(), key, statelog.ReadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		out[key] = e
	}
	return out
}

// sharedDecodeOf is the apiserver's shared decode of the stored default/name of kind k.
func sharedDecodeOf(t *testing.T, s *Server, l *statelog.Log, k *schemas.Kind, name string) runtime.Object {
	t.Helper()
	e, err := l.Get(context.Background(), schemas.StorageKey(k, "default", name), statelog.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := s.DecodeShared(k, e.Value, e.Rev)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}
