package informer_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// A node's pod informer over the API holds only the pods bound to that node while other nodes'
// pods exist, gets a pod bound later and a deletion, and resumes after an apiserver restart.
func TestAPISourceCachesOnlyTheSelectedPods(t *testing.T) {
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) {
		c.Components = []string{controlplane.APIServer}
		c.Bookmarks = 200 * time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	create := func(name, node string) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		if _, err := cp.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	create("a1", "node-a")
	create("b1", "node-b")
	create("b2", "node-b")
	create("unbound", "")

	kind, _ := schemas.ByResource("", "v1", "pods")
	inf := informer.NewFrom(&informer.APISource{Client: cp.Client, Kind: kind, FieldSelector: "spec.nodeName=node-a", PollSeconds: 1}, kind, "")
	deleted := make(chan string, 8)
	inf.AddHandler(informer.Funcs{Delete: func(o runtime.Object) { deleted <- o.(*corev1.Pod).Name }})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = inf.Run(runCtx) }()
	defer func() { stop(); <-done }()
	if !inf.WaitForSync(ctx) {
		t.Fatal("never synced")
	}
	cached := func() string {
		var names []string
		for _, o := range inf.List(nil) {
			names = append(names, o.(*corev1.Pod).Name)
		}
		sort.Strings(names)
		return strings.Join(names, ",")
	}
	if got := cached(); got != "a1" {
		t.Fatalf("cache after the list: %s, want a1", got)
	}
	waitCached := func(want string) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, 20*time.Millisecond, func() error {
			if got := cached(); got != want {
				return fmt.Errorf("cache %s, want %s", got, want)
			}
			return nil
		})
	}

	// Another node's pod, then one of ours: ours arrives, the other never does.
	create("b3", "node-b")
	create("a2", "node-a")
	waitCached("a1,a2")
	// A pod bound later (the scheduler's binding) arrives too.
	if err := cp.Client.Bind(ctx, "default", "unbound", "node-a"); err != nil {
		t.Fatal(err)
	}
	waitCached("a1,a2,unbound")

	// The apiserver restarts; the informer resumes from its revision and misses nothing.
	starts := cp.API.Starts()
	cp.Actors.Send(cp.Actor(controlplane.APIServer), &actorkit.Crash{})
	testutil.Eventually(t, 30*time.Second, 20*time.Millisecond, func() error {
		if cp.API.Starts() <= starts {
			return fmt.Errorf("apiserver not restarted")
		}
		return nil
	})
	testutil.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		_, err := cp.Client.Get(ctx, kind, "default", "a1")
		return err
	})
	create("a3", "node-a")
	if err := cp.Client.Delete(ctx, controllerkit.MustKind("", "pods"), "default", "a1",
		&metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	waitCached("a2,a3,unbound")
	if got := <-deleted; got != "a1" {
		t.Fatalf("deleted %s, want a1", got)
	}
}
