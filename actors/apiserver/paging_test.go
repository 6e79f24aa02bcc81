package apiserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

func TestChunkedListIsOneRevisionWhileWritesHappen(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	cms := newClientset(t, cp.URL()).CoreV1().ConfigMaps("default")
	ctx := context.Background()
	const n = 7
	want := []string{}
	for i := range n {
		name := fmt.Sprintf("cm-%d", i)
		if _, err := cms.Create(ctx, configMap(name, "1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, name+"=1")
	}
	var got []string
	var rv, token string
	for page := 0; ; page++ {
		l, err := cms.List(ctx, metav1.ListOptions{Limit: 1, Continue: token})
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if rv == "" {
			rv = l.ResourceVersion
		}
		if l.ResourceVersion != rv || len(l.Items) != 1 {
			t.Fatalf("page %d: %d items at %s, want 1 at the first page's %s", page, len(l.Items), l.ResourceVersion, rv)
		}
		if rem := l.RemainingItemCount; (l.Continue == "") != (rem == nil) || rem != nil && *rem != int64(n-1-page) {
			t.Fatalf("page %d: remainingItemCount %v with continue %q, want %d", page, rem, l.Continue, n-1-page)
		}
		got = append(got, l.Items[0].Name+"="+l.Items[0].Data["v"])
		// Writes between pages change nothing in the list being paged.
		victim := fmt.Sprintf("cm-%d", n-1-page)
		if page%2 == 0 {
			if _, err := cms.Update(ctx, configMap(victim, "2"), metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		} else if err := cms.Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cms.Create(ctx, configMap(fmt.Sprintf("cm-%d-new", page), "1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if token = l.Continue; token == "" {
			break
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("paged list:\n got %v\nwant %v", got, want)
	}

	// client-go's pager sees the latest state, each object once.
	latest, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return cms.List(ctx, o) })
	p.PageSize = 2
	var paged []string
	if err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		paged = append(paged, obj.(*corev1.ConfigMap).Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(paged) != len(latest.Items) || len(paged) < n {
		t.Fatalf("pager: %v, want the %d objects of %s", paged, len(latest.Items), listed(latest))
	}
	for i, cm := range latest.Items {
		if paged[i] != cm.Name {
			t.Fatalf("pager: %v, want %s", paged, listed(latest))
		}
	}
}

func TestContinueAfterCompactionIsGone(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	cms := newClientset(t, cp.URL()).CoreV1().ConfigMaps("default")
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c"} {
		if _, err := cms.Create(ctx, configMap(name, "1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := cms.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || first.Continue == "" {
		t.Fatalf("first page: %v %v", first, err)
	}
	if _, err := cms.Update(ctx, configMap("b", "2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Log.Compact(ctx, cp.Log.Rev()); err != nil {
		t.Fatal(err)
	}
	_, err = cms.List(ctx, metav1.ListOptions{Limit: 1, Continue: first.Continue})
	var st apierrors.APIStatus
	if !apierrors.IsResourceExpired(err) || !strings.Contains(err.Error(), "The provided continue parameter is too old") || !asStatus(err, &st) {
		t.Fatalf("continue past compaction: %v, want 410 Expired", err)
	}
	// The 410 carries a token that continues, inconsistently, at the latest revision.
	rest, err := cms.List(ctx, metav1.ListOptions{Continue: st.Status().ListMeta.Continue})
	if err != nil || listed(rest) != "b=2@"+rest.Items[0].ResourceVersion+" c=1@"+rest.Items[1].ResourceVersion {
		t.Fatalf("inconsistent continue: %v %v", rest, err)
	}
	if _, err := cms.List(ctx, metav1.ListOptions{Continue: "not-a-token"}); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "invalid continue token") {
		t.Fatalf("bad token: %v, want 400", err)
	}
}

func asStatus(err error, st *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	*st = s
	return ok
}

func TestKubectlGetChunkSize(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	kubectl := kubectlEnv(t, cp.URL())
	cms := newClientset(t, cp.URL()).CoreV1().ConfigMaps("default")
	for i := range 5 {
		if _, err := cms.Create(context.Background(), configMap(fmt.Sprintf("cm-%d", i), "1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, chunk := range []string{"--chunk-size=1", "--chunk-size=2", "--chunk-size=500"} {
		out, err := kubectl("get", "configmaps", chunk, "--no-headers", "-o", "custom-columns=NAME:.metadata.name", "-v=6")
		if err != nil {
			t.Fatalf("kubectl get %s: %v\n%s", chunk, err, out)
		}
		var names []string
		continues := 0
		for _, l := range strings.Split(out, "\n") {
			switch {
			case strings.Contains(l, "continue="):
				continues++
			case strings.HasPrefix(l, "cm-"):
				names = append(names, strings.TrimSpace(l))
			}
		}
		if strings.Join(names, ",") != "cm-0,cm-1,cm-2,cm-3,cm-4" {
			t.Fatalf("kubectl get %s listed %v\n%s", chunk, names, out)
		}
		if chunk == "--chunk-size=1" && continues != 4 {
			t.Fatalf("kubectl get --chunk-size=1 asked %d continued pages, want 4\n%s", continues, out)
		}
	}
}
