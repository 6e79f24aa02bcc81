package informer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// recordingDecoder decodes as the apiserver's watch cache does and keeps what it returned.
type recordingDecoder struct {
	mu    sync.Mutex
	byRev map[uint64]runtime.Object
	calls int
}

func (d *recordingDecoder) decode(k *schemas.Kind, value []byte, rev uint64) (runtime.Object, error) {
	obj := k.New()
	if err := json.Unmarshal(value, obj); err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(k.GVK)
	obj.(metav1.Object).SetResourceVersion(fmt.Sprint(rev))
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	d.byRev[rev] = obj
	return obj, nil
}

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

// An informer given the process's shared decode keeps that object (less its managedFields,
// in a copy of its top-level struct) instead of decoding the value again, and leaves the
// shared object as it was.
func TestInformerTakesSharedDecodedObjects(t *testing.T) {
	l := openLog(t, statelog.Config{})
	f := informer.NewFactory(l)
	d := &recordingDecoder{byRev: map[uint64]runtime.Object{}}
	f.ShareDecoded(d.decode)
	inf := f.ForKind(cmKind(), "")
	runInformer(t, inf)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "default", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1"}}},
		Data: map[string]string{"v": "1"}}
	data, _ := schemas.EncodeJSON(cm)
	rev, err := l.Create(context.Background(), schemas.StorageKey(cmKind(), "default", "m"), data, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := waitCached(t, inf, "m", "1")
	d.mu.Lock()
	shared, calls := d.byRev[rev].(*corev1.ConfigMap), d.calls
	d.mu.Unlock()
	if shared == nil || calls != 1 {
		t.Fatalf("the shared decoder was called %d times, for rev %d: %v", calls, rev, shared)
	}
	if got == shared || got.ManagedFields != nil || got.ResourceVersion != fmt.Sprint(rev) {
		t.Fatalf("cached %+v: want a copy without managedFields at rev %d", got.ObjectMeta, rev)
	}
	if len(shared.ManagedFields) != 1 {
		t.Fatalf("the shared object lost its managedFields: %+v", shared.ObjectMeta)
	}
	if reflect.ValueOf(got.Data).UnsafePointer() != reflect.ValueOf(shared.Data).UnsafePointer() ||
		reflect.ValueOf(got.Labels).UnsafePointer() != reflect.ValueOf(shared.Labels).UnsafePointer() {
		t.Fatal("the cached object decoded its own data and labels instead of sharing them")
	}
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
