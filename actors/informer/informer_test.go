package informer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

func openLog(t *testing.T, cfg statelog.Config) *statelog.Log {
	srv, err := natsserver.Start(natsserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cfg.Memory = true
	l, err := statelog.Open(context.Background(), nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func cmKind() *schemas.Kind { k, _ := schemas.ByResource("", "v1", "configmaps"); return k }

func putCM(t *testing.T, l *statelog.Log, name, value string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"v": value}}
	data, _ := schemas.EncodeJSON(cm)
	key := schemas.StorageKey(cmKind(), "default", name)
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

// A handler slower than the log makes the watch overflow; the informer resumes from its last
// revision and its cache still converges on the log, with the final value of every key.
func TestInformerConvergesAfterFallingBehind(t *testing.T) {
	l := openLog(t, statelog.Config{WatchBuffer: 2})
	inf := informer.New(l, cmKind(), "")
	var mu sync.Mutex
	last := map[string]string{}
	inf.AddHandler(informer.Funcs{
		Add:    func(o runtime.Object) { time.Sleep(time.Millisecond); record(&mu, last, o) },
		Update: func(_, o runtime.Object) { time.Sleep(time.Millisecond); record(&mu, last, o) },
		Delete: func(o runtime.Object) {
			mu.Lock()
			delete(last, o.(*corev1.ConfigMap).Name)
			mu.Unlock()
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.Run(ctx)
	if !inf.WaitForSync(ctx) {
		t.Fatal("no sync")
	}
	for round := range 5 {
		for i := range 20 {
			putCM(t, l, fmt.Sprintf("cm%d", i), fmt.Sprint(round))
		}
	}
	if _, err := l.Delete(context.Background(), schemas.StorageKey(cmKind(), "default", "cm0"), 0, nil); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, 20*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(last) != 19 {
			return fmt.Errorf("handlers saw %d live objects, want 19", len(last))
		}
		for name, v := range last {
			if v != "4" {
				return fmt.Errorf("%s ended at %s, want 4", name, v)
			}
		}
		if n := len(inf.List(nil)); n != 19 {
			return fmt.Errorf("cache holds %d", n)
		}
		if inf.Rev() != l.Rev() {
			return fmt.Errorf("informer at %d, log at %d", inf.Rev(), l.Rev())
		}
		return nil
	})
	if _, ok := inf.Get("default", "cm0"); ok {
		t.Fatal("deleted object still cached")
	}
}

func record(mu *sync.Mutex, m map[string]string, o runtime.Object) {
	cm := o.(*corev1.ConfigMap)
	mu.Lock()
	m[cm.Name] = cm.Data["v"]
	mu.Unlock()
}

// Cached objects carry no managedFields: nothing reads them from a cache.
func TestInformerDropsManagedFields(t *testing.T) {
	l := openLog(t, statelog.Config{})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "default",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1"}}},
		Data: map[string]string{"v": "1"}}
	data, _ := schemas.EncodeJSON(cm)
	if _, err := l.Create(context.Background(), schemas.StorageKey(cmKind(), "default", "m"), data, nil); err != nil {
		t.Fatal(err)
	}
	inf := informer.New(l, cmKind(), "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = inf.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if !inf.WaitForSync(wctx) {
		t.Fatal("not synced")
	}
	got, ok := informer.Of[*corev1.ConfigMap](inf).Get("default", "m")
	if !ok || got.Data["v"] != "1" || got.ManagedFields != nil {
		t.Fatalf("cached %+v (found %v)", got, ok)
	}
}

// A factory over a log opened for some kinds refuses an informer of another: it would
// otherwise wait forever for objects the process never receives.
func TestFactoryRefusesKindsOutsideTheLog(t *testing.T) {
	l := openLog(t, statelog.Config{Only: []string{schemas.StoragePrefix(cmKind(), "")}})
	f := informer.NewFactory(l)
	if f.ForKind(cmKind(), "default") == nil {
		t.Fatal("no informer of the log's own kind")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("an informer of pods over a log of configmaps")
		}
	}()
	f.For("", "pods")
}
