package apiserver_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

func newPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "informer"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "skiff.local/httpecho:v1"}}},
	}
}

// recorder collects informer notifications.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}

func (r *recorder) has(s string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e == s {
			return nil
		}
	}
	return fmt.Errorf("no %q in %v", s, r.events)
}

func TestClientGoInformerListsAndWatchesPods(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: cp.URL()})
	if err != nil {
		t.Fatal(err)
	}
	informerFollowsPods(t, cs)
}

// informerFollowsPods runs a pod informer of cs through its list, a create, an update, a
// refused stale update and a delete.
func informerFollowsPods(t *testing.T, cs *kubernetes.Clientset) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pods := cs.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, newPod("before"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods()
	rec := &recorder{}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { rec.add("add " + o.(*corev1.Pod).Name) },
		UpdateFunc: func(_, o any) {
			p := o.(*corev1.Pod)
			rec.add("update " + p.Name + " " + p.Labels["v"])
		},
		DeleteFunc: func(o any) {
			if p, ok := o.(*corev1.Pod); ok {
				rec.add("delete " + p.Name)
			}
		},
	})
	t0 := time.Now()
	defer func() { t.Logf("took %v", time.Since(t0)) }()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }() // Shutdown waits for the informers to stop
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		t.Fatal("informer never synced")
	}
	t.Logf("synced after %v", time.Since(t0))
	if err := rec.has("add before"); err != nil {
		t.Fatal("initial list: ", err)
	}

	p, err := pods.Create(ctx, newPod("after"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels["v"] = "2"
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A second update from the same stale copy must be refused.
	p.Labels["v"] = "3"
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: want 409 Conflict, got %v", err)
	}
	if err := pods.Delete(ctx, "before", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"add after", "update after 2", "delete before"} {
		testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error { return rec.has(want) })
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		got, err := inf.Lister().Pods("default").List(labels.Everything())
		if err != nil || len(got) != 1 || got[0].Name != "after" || got[0].Labels["v"] != "2" {
			return fmt.Errorf("lister has %v (%v)", got, err)
		}
		return nil
	})
	if err := rec.has("update after 3"); err == nil {
		t.Fatal("the refused update reached the informer")
	}
}
