package informer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/logvalue"
)

// A kind served in two versions has one cache, of the version the log holds (autoscaling/v1
// HPAs are stored as v2), whichever version a component asks for first.
func TestOneInformerForAKindInTwoVersions(t *testing.T) {
	f := informer.NewFactory(openLog(t, statelog.Config{}))
	v1, _ := schemas.ByResource("autoscaling", "v1", "horizontalpodautoscalers")
	v2, _ := schemas.ByResource("autoscaling", "v2", "horizontalpodautoscalers")
	first := f.ForKind(v1, "")
	if f.ForKind(v2, "") != first || f.For("autoscaling", "horizontalpodautoscalers") != first {
		t.Fatal("the two versions of HorizontalPodAutoscaler got separate informers")
	}
	if got := first.Kind(); got != v2 {
		t.Fatalf("the informer caches %v, want the stored %v", got.GVK, v2.GVK)
	}
}

// An admitted subset: unbound pods are neither cached nor handed to handlers; a pod enters
// the cache when bound (an add) and leaves it when no longer admitted (a delete); asking for
// the rule after the informer exists is a code error.
func TestAdmitCachesOnlyWhatItAccepts(t *testing.T) {
	l := openLog(t, statelog.Config{})
	f := informer.NewFactory(l)
	f.Admit("", "pods", func(value []byte) bool {
		node, err := logvalue.PodNodeName(value)
		return err != nil || node != ""
	})
	pods := informer.Shared[*corev1.Pod](f, "", "pods")
	var mu sync.Mutex
	var seen []string
	note := func(what string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { mu.Lock(); seen = append(seen, what+" "+p.Name); mu.Unlock() }
	}
	pods.AddHandler(informer.TypedFuncs[*corev1.Pod]{Add: note("add"), Delete: note("delete"),
		Update: func(_, p *corev1.Pod) { note("update")(p) }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go pods.Informer().Run(ctx)
	putPod(t, l, "a", "", "rs")   // unbound: not admitted
	putPod(t, l, "b", "n1", "rs") // bound
	putPod(t, l, "a", "n2", "rs") // bound now: enters
	putPod(t, l, "b", "", "rs")   // no longer admitted: leaves
	waitUntil(t, func() bool { return pods.Informer().Rev() >= l.Rev() })
	mu.Lock()
	got := fmt.Sprint(seen)
	mu.Unlock()
	if want := "[add b add a delete b]"; got != want {
		t.Errorf("handlers saw %s, want %s", got, want)
	}
	if _, ok := pods.Get("default", "b"); ok || pods.Informer().Len() != 1 {
		t.Errorf("the cache holds %d pods (b: %v), want only a", pods.Informer().Len(), ok)
	}
	defer func() {
		if recover() == nil {
			t.Error("Admit after the informer was made did not panic")
		}
	}()
	f.Admit("", "pods", func([]byte) bool { return true })
}
