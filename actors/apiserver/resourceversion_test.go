package apiserver_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

func newClientset(t *testing.T, url string) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: url, QPS: -1}) // no client-side throttling
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func configMap(name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": value}}
}

// listed renders a list as name=value@rv, in order.
func listed(l *corev1.ConfigMapList) string {
	parts := []string{}
	for _, cm := range l.Items {
		parts = append(parts, cm.Name+"="+cm.Data["v"]+"@"+cm.ResourceVersion)
	}
	return strings.Join(parts, " ")
}

func TestListResourceVersionMatchExactAndNotOlderThan(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	cms := newClientset(t, cp.URL()).CoreV1().ConfigMaps("default")
	ctx := context.Background()
	a, err := cms.Create(ctx, configMap("a", "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cms.Create(ctx, configMap("b", "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.Data["v"] = "2"
	a2, err := cms.Update(ctx, a, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	exact := func(rv string) (*corev1.ConfigMapList, error) {
		return cms.List(ctx, metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	}
	l, err := exact(b.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("a=1@%s b=1@%s", a.ResourceVersion, b.ResourceVersion)
	if got := listed(l); got != want || l.ResourceVersion != b.ResourceVersion {
		t.Fatalf("Exact at %s: %q at %s, want %q", b.ResourceVersion, got, l.ResourceVersion, want)
	}
	l, err = cms.List(ctx, metav1.ListOptions{ResourceVersion: b.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := listed(l), "a=2@"+a2.ResourceVersion; got != want {
		t.Fatalf("NotOlderThan %s: %q, want %q", b.ResourceVersion, got, want)
	}
	// Compacted past b's creation: that state is gone, as etcd answers.
	if err := cp.Log.Compact(ctx, cp.Log.Rev()); err != nil {
		t.Fatal(err)
	}
	_, err = exact(b.ResourceVersion)
	if !apierrors.IsResourceExpired(err) || !strings.Contains(err.Error(), "The resourceVersion for the provided list is too old.") {
		t.Fatalf("Exact at a compacted revision: %v, want 410 Gone", err)
	}
	if l, err = exact(strconv.FormatUint(cp.Log.Rev(), 10)); err != nil || listed(l) != "a=2@"+a2.ResourceVersion {
		t.Fatalf("Exact at the compaction revision: %v %v", l, err)
	}
}

func TestResourceVersionMatchRefusedAsKubernetesDoes(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	cms := newClientset(t, cp.URL()).CoreV1().ConfigMaps("default")
	ctx := context.Background()
	for _, c := range []struct {
		opts metav1.ListOptions
		msg  string
	}{
		{metav1.ListOptions{ResourceVersionMatch: metav1.ResourceVersionMatchExact},
			"resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"},
		{metav1.ListOptions{ResourceVersion: "0", ResourceVersionMatch: metav1.ResourceVersionMatchExact},
			`resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"`},
		{metav1.ListOptions{ResourceVersion: "1", ResourceVersionMatch: "Newest"},
			`resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""`},
	} {
		_, err := cms.List(ctx, c.opts)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("list %+v: %v, want 422 %q", c.opts, err, c.msg)
		}
	}
	_, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: "1", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if msg := "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"; !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), msg) {
		t.Errorf("watch with resourceVersionMatch alone: %v, want 422 %q", err, msg)
	}
}

// A read at a revision the log has not reached waits for it up to 3 s (kube-apiserver's
// watch cache blockTimeout), then answers 504 "Too large resource version" with Retry-After.
func TestFutureResourceVersionWaitsThenTooLarge(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	cs := newClientset(t, cp.URL())
	ctx := context.Background()
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("c", "1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	future := cp.Log.Rev() + 1000
	rv := strconv.FormatUint(future, 10)
	raw := func(params *metav1.ListOptions, name string) *rest.Request {
		r := cs.CoreV1().RESTClient().Get().Namespace("default").Resource("configmaps").MaxRetries(0)
		if name != "" {
			r = r.Name(name)
		}
		return r.VersionedParams(params, scheme.ParameterCodec)
	}
	cases := map[string]*rest.Request{
		"list":              raw(&metav1.ListOptions{ResourceVersion: rv}, ""),
		"list NotOlderThan": raw(&metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}, ""),
		"list Exact":        raw(&metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact}, ""),
		"get":               raw(&metav1.ListOptions{ResourceVersion: rv}, "c"),
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			res := req.Do(ctx)
			took := time.Since(start)
			err := res.Error()
			var code int
			res.StatusCode(&code)
			if !apierrors.IsTimeout(err) || !apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) || code != 504 {
				t.Fatalf("%d %v, want 504 Too large resource version", code, err)
			}
			if msg := fmt.Sprintf("Too large resource version: %d, current: ", future); !strings.Contains(err.Error(), msg) {
				t.Fatalf("%v, want %q", err, msg)
			}
			if after, ok := apierrors.SuggestsClientDelay(err); !ok || after != 1 {
				t.Fatalf("retry after %d %v, want 1", after, ok)
			}
			if took < 3*time.Second || took > 15*time.Second {
				t.Fatalf("answered after %v, want after the 3s wait", took)
			}
		})
	}
	t.Run("Retry-After header", func(t *testing.T) {
		t.Parallel()
		code, _, h := api{t: t, base: cp.URL()}.send("GET", "/api/v1/namespaces/default/configmaps?resourceVersion="+rv, "", "")
		if code != 504 || h.Get("Retry-After") != "1" {
			t.Fatalf("%d Retry-After %q, want 504 and 1", code, h.Get("Retry-After"))
		}
	})
	t.Run("watch list", func(t *testing.T) {
		t.Parallel()
		ch := watchEvents(t, cp.URL()+"/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&resourceVersion="+rv)
		expectEvents(t, ch, "ERROR 504")
	})
}

// A list at a revision just ahead of the view answers as soon as the view reaches it.
func TestFutureResourceVersionAnswersOnceReached(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	cms := newClientset(t, cp.URL()).CoreV1().ConfigMaps("default")
	ctx := context.Background()
	next := strconv.FormatUint(cp.Log.Rev()+1, 10)
	type result struct {
		l   *corev1.ConfigMapList
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := cms.List(ctx, metav1.ListOptions{ResourceVersion: next, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		done <- result{l, err}
	}()
	created, err := cms.Create(ctx, configMap("late", "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || listed(r.l) != "late=1@"+created.ResourceVersion {
		t.Fatalf("list at %s: %v %v, want the object written at it", next, r.l, r.err)
	}
}
