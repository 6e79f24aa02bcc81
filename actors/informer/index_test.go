package informer_test

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

func putPod(t *testing.T, l *statelog.Log, name, node, owner string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: owner, UID: types.UID(owner), Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: node}}
	data, _ := schemas.EncodeJSON(p)
	k, _ := schemas.ByResource("", "v1", "pods")
	key := schemas.StorageKey(k, "default", name)
	if e, err := l.Get(context.Background(), key, statelog.ReadOptions{}); err == nil {
		if _, err := l.Update(context.Background(), key, data, e.Rev, nil); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := l.Create(context.Background(), key, data, nil); err != nil {
		t.Fatal(err)
	}
}

func names(pods []*corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}

// Indexes follow updates (a pod moving between nodes leaves the old value) and deletes; one
// shared informer per kind; two runners never both watch; a late handler replays the cache.
func TestSharedIndexedInformer(t *testing.T) {
	l := openLog(t, statelog.Config{})
	f := informer.NewFactory(l)
	if f.For("", "pods") != f.For("", "pods") {
		t.Fatal("the factory made two pod informers")
	}
	pods := informer.Shared[*corev1.Pod](f, "", "pods")
	pods.AddIndexer(informer.IndexNodeName, func(p *corev1.Pod) []string { return []string{p.Spec.NodeName} })
	pods.Informer().AddIndexer(informer.IndexControllerUID, informer.ControllerUIDIndex)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go pods.Informer().Run(ctx)
	go pods.Informer().Run(ctx) // a second runner waits: events must not double
	var adds atomic.Int32
	pods.AddHandler(informer.TypedFuncs[*corev1.Pod]{Add: func(*corev1.Pod) { adds.Add(1) }})
	putPod(t, l, "a", "n1", "rs1")
	putPod(t, l, "b", "n1", "rs2")
	putPod(t, l, "c", "n2", "rs1")
	putPod(t, l, "b", "n2", "rs2") // moves to n2
	putPod(t, l, "a", "n1", "rs1") // an update that keeps every index value stays filed
	waitUntil(t, func() bool { return pods.Informer().Rev() >= l.Rev() })
	for _, tc := range []struct{ index, value, want string }{
		{informer.IndexNodeName, "n1", "[a]"},
		{informer.IndexNodeName, "n2", "[b c]"},
		{informer.IndexControllerUID, "rs1", "[a c]"},
		{informer.IndexNamespace, "default", "[a b c]"},
		{informer.IndexNodeName, "n3", "[]"},
	} {
		if got := names(pods.ByIndex(tc.index, tc.value)); got != tc.want {
			t.Errorf("ByIndex(%s, %s) = %s, want %s", tc.index, tc.value, got, tc.want)
		}
	}
	// An index read gives the cached objects themselves, updated ones too.
	for _, index := range []string{informer.IndexNamespace, informer.IndexNodeName, informer.IndexControllerUID} {
		for _, value := range []string{"default", "n1", "n2", "rs1", "rs2"} {
			for _, p := range pods.ByIndex(index, value) {
				if cached, _ := pods.Get(p.Namespace, p.Name); cached != p {
					t.Errorf("ByIndex(%s, %s) gave %s at %s, the cache holds it at %s", index, value, p.Name, p.ResourceVersion, cached.ResourceVersion)
				}
			}
		}
	}
	if n := adds.Load(); n != 3 {
		t.Errorf("handler saw %d adds, want 3 (no doubled events)", n)
	}
	var replayed atomic.Int32
	pods.AddHandler(informer.TypedFuncs[*corev1.Pod]{Add: func(*corev1.Pod) { replayed.Add(1) }})
	if n := replayed.Load(); n != 3 {
		t.Errorf("a late handler replayed %d objects, want 3", n)
	}
	k, _ := schemas.ByResource("", "v1", "pods")
	e, _ := l.Get(ctx, schemas.StorageKey(k, "default", "c"), statelog.ReadOptions{})
	if _, err := l.Delete(ctx, schemas.StorageKey(k, "default", "c"), e.Rev, nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return pods.Informer().Rev() >= l.Rev() })
	if got := names(pods.ByIndex(informer.IndexNodeName, "n2")); got != "[b]" {
		t.Errorf("after delete: n2 = %s, want [b]", got)
	}
}

// Only the controller reference files an object: an owner that does not control it (a
// garbage-collection dependency) finds nothing to claim there.
func TestControllerUIDIndexFilesOnlyTheController(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
		{Kind: "ConfigMap", Name: "dep", UID: "dep"},
		{Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: ptr.To(true)},
	}}}
	if got := informer.ControllerUIDIndex(p); fmt.Sprint(got) != "[rs]" {
		t.Errorf("ControllerUIDIndex = %v, want [rs]", got)
	}
	p.OwnerReferences = p.OwnerReferences[:1]
	if got := informer.ControllerUIDIndex(p); got != nil {
		t.Errorf("ControllerUIDIndex of an object without a controller = %v, want none", got)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
