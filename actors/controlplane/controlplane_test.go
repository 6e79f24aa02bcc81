package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"k": name}}
}

// A restart of the whole control plane on the same data dir keeps every object at its revision,
// and a watch from a revision taken before the restart delivers exactly the writes after it.
func TestRestartKeepsStateAndWatchResumes(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	cfg := controlplane.Config{DataDir: dir, Listen: "127.0.0.1:0"}
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	created, err := cp.Client.Create(ctx, configMap("before"))
	if err != nil {
		t.Fatal(err)
	}
	mark := cp.Log.Rev()
	for i := range 5 {
		if _, err := cp.Client.Create(ctx, configMap(fmt.Sprintf("after-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	cmKind, _ := schemas.ByResource("", "v1", "configmaps")
	if err := cp.Client.Delete(ctx, cmKind, "default", "after-0", nil); err != nil {
		t.Fatal(err)
	}
	cp.Stop()

	cp, err = controlplane.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	got, err := cp.Client.Get(ctx, cmKind, "default", "before")
	if err != nil {
		t.Fatal(err)
	}
	if got.(metav1.Object).GetResourceVersion() != created.(metav1.Object).GetResourceVersion() {
		t.Fatalf("revision changed across restart: %s -> %s", created.(metav1.Object).GetResourceVersion(), got.(metav1.Object).GetResourceVersion())
	}
	w, err := cp.Log.Watch(ctx, schemas.StoragePrefix(cmKind, "default"), statelog.WatchOptions{FromRev: mark})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	want := []string{"put after-0", "put after-1", "put after-2", "put after-3", "put after-4", "delete after-0"}
	for _, wnt := range want {
		select {
		case ev := <-w.Events():
			name := ev.Key[len(schemas.StoragePrefix(cmKind, "default")):]
			op := "put"
			if ev.Type == statelog.EventDelete {
				op = "delete"
			}
			if op+" "+name != wnt {
				t.Fatalf("want %q, got %q", wnt, op+" "+name)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("missing event %q", wnt)
		}
	}
	select {
	case ev := <-w.Events():
		t.Fatalf("unexpected extra event %v %s", ev.Type, ev.Key)
	case <-time.After(200 * time.Millisecond):
	}
}

// A crash of the apiserver actor is a restart, not an outage of the process.
func TestAPIServerActorRestartsAfterCrash(t *testing.T) {
	cp := testutil.StartControlPlane(t)
	ctx := context.Background()
	cp.Actors.Send(cp.Actor("apiserver"), &actorkit.Crash{})
	// The crash is asynchronous: first see the supervisor restart the actor, then that the
	// restarted actor serves both endpoints.
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := cp.API.Starts(); n != 2 {
			return fmt.Errorf("the apiserver actor started %d times, want 2 (start + restart)", n)
		}
		return nil
	})
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cp.Client.Create(ctx, configMap(fmt.Sprintf("x-%d", time.Now().UnixNano())))
		return err
	})
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		resp, err := http.Get(cp.URL() + "/api/v1/namespaces/default/configmaps")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	})
	if n := cp.API.Starts(); n != 2 {
		t.Fatalf("the apiserver actor started %d times, want exactly 2", n)
	}
}

// A second control plane on a data dir in use fails before touching the store, and the first
// keeps serving what it wrote.
func TestSecondControlPlaneOnOneDataDirRefuses(t *testing.T) {
	ctx := context.Background()
	cfg := controlplane.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0"}
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	if _, err := cp.Client.Create(ctx, configMap("kept")); err != nil {
		t.Fatal(err)
	}
	second, err := controlplane.Start(ctx, cfg)
	if !errors.Is(err, controlplane.ErrDataDirLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid=%d", os.Getpid())) {
		if second != nil {
			second.Stop()
		}
		t.Fatalf("second Start: %v, want ErrDataDirLocked naming this pid", err)
	}
	cmKind, _ := schemas.ByResource("", "v1", "configmaps")
	if _, err := cp.Client.Get(ctx, cmKind, "default", "kept"); err != nil {
		t.Fatalf("the first control plane after the refused start: %v", err)
	}
}

// In a process running the apiserver, the shared informers cache the apiserver's decode of
// each write (its data is the same memory), not one of their own.
func TestInformersShareTheAPIServersDecodes(t *testing.T) {
	cp := testutil.StartControlPlane(t)
	ctx := context.Background()
	created, err := cp.Client.Create(ctx, configMap("shared"))
	if err != nil {
		t.Fatal(err)
	}
	rv := created.(*corev1.ConfigMap).ResourceVersion
	cms := informer.Shared[*corev1.ConfigMap](cp.Informers, "", "configmaps")
	var cached *corev1.ConfigMap
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		c, ok := cms.Get("default", "shared")
		if !ok || c.ResourceVersion != rv {
			return fmt.Errorf("informer has %v, want resourceVersion %s", c, rv)
		}
		cached = c
		return nil
	})
	k := cms.Informer().Kind()
	e, err := cp.Log.Get(ctx, schemas.StorageKey(k, "default", "shared"), statelog.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := cp.API.DecodeShared(k, e.Value, e.Rev)
	if err != nil {
		t.Fatal(err)
	}
	if shared := obj.(*corev1.ConfigMap); reflect.ValueOf(shared.Data).Pointer() != reflect.ValueOf(cached.Data).Pointer() {
		t.Fatal("the informer decoded the ConfigMap itself")
	}
}
