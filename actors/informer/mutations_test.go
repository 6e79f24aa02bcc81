package informer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

func runInformer(t *testing.T, inf *informer.Informer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = inf.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if !inf.WaitForSync(wctx) {
		t.Fatal("not synced")
	}
}

func waitCached(t *testing.T, inf *informer.Informer, name, value string) *corev1.ConfigMap {
	t.Helper()
	var cm *corev1.ConfigMap
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		got, ok := informer.Of[*corev1.ConfigMap](inf).Get("default", name)
		if !ok || got.Data["v"] != value {
			return fmt.Errorf("cache has %v (found %v), want v=%s", got, ok, value)
		}
		cm = got
		return nil
	})
	return cm
}

// With CheckMutations, a reader that changes a cached object is found, while the object is
// cached and after the log replaced it.
func TestMutationCheckFindsChangedCachedObjects(t *testing.T) {
	l := openLog(t, statelog.Config{})
	f := informer.NewFactory(l)
	f.CheckMutations()
	inf := f.ForKind(cmKind(), "")
	runInformer(t, inf)
	putCM(t, l, "m", "1")
	putCM(t, l, "other", "1")
	got := waitCached(t, inf, "m", "1")
	waitCached(t, inf, "other", "1")
	if err := f.Mutations(); err != nil {
		t.Fatalf("objects nobody changed reported: %v", err)
	}
	got.Data["v"] = "changed by a reader" // what a controller must never do
	err := f.Mutations()
	if err == nil || !strings.Contains(err.Error(), "configmaps") || !strings.Contains(err.Error(), schemas.StorageKey(cmKind(), "default", "m")) {
		t.Fatalf("a changed cached object reported as %v", err)
	}
	if strings.Contains(err.Error(), "other") {
		t.Fatalf("an unchanged object reported: %v", err)
	}
	putCM(t, l, "m", "2") // the changed object leaves the cache
	waitCached(t, inf, "m", "2")
	if err := f.Mutations(); err == nil || !strings.Contains(err.Error(), "changed by a reader") {
		t.Fatalf("the change is forgotten once the object is replaced: %v", err)
	}
}
