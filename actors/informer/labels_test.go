package informer_test

import (
	"context"
	"maps"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// Objects with equal labels share one cached map (a ReplicaSet's pods), whatever order the
// labels were written in; other labels get a map of their own; every object keeps its labels.
func TestCachedObjectsShareEqualLabels(t *testing.T) {
	l := openLog(t, statelog.Config{})
	k, _ := schemas.ByResource("", "v1", "pods")
	want := map[string]map[string]string{
		"a": {"app": "web", "pod-template-hash": "h1"},
		"b": {"pod-template-hash": "h1", "app": "web"},
		"c": {"app": "web", "pod-template-hash": "h2"},
		"d": nil,
	}
	for name, labels := range want {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels}}
		data, _ := schemas.EncodeJSON(p)
		if _, err := l.Create(context.Background(), schemas.StorageKey(k, "default", name), data, nil); err != nil {
			t.Fatal(err)
		}
	}
	pods := informer.Shared[*corev1.Pod](informer.NewFactory(l), "", "pods")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go pods.Informer().Run(ctx)
	waitUntil(t, func() bool { return pods.Informer().Rev() >= l.Rev() })
	got := map[string]map[string]string{}
	for _, name := range []string{"a", "b", "c", "d"} {
		p, ok := pods.Get("default", name)
		if !ok {
			t.Fatalf("pod %s not cached", name)
		}
		if !maps.Equal(p.Labels, want[name]) {
			t.Errorf("pod %s labels %v, want %v", name, p.Labels, want[name])
		}
		got[name] = p.Labels
	}
	same := func(x, y string) bool {
		return reflect.ValueOf(got[x]).UnsafePointer() == reflect.ValueOf(got[y]).UnsafePointer()
	}
	if !same("a", "b") {
		t.Error("pods a and b have equal labels in two maps, want one shared")
	}
	if same("a", "c") {
		t.Error("pods a and c share a map of different labels")
	}
}
