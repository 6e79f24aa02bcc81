package garbagecollector_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/garbagecollector"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/internal/tracing/tracingtest"
)

func setup(t *testing.T) (*controlplane.ControlPlane, context.Context) {
	cp := ct.Start(t)
	ct.Spawn(t, cp, "gc", garbagecollector.New(garbagecollector.Config{Informers: cp.Informers, Client: cp.Client}))
	return cp, ct.Ctx(t)
}

func cm(t *testing.T, cp *controlplane.ControlPlane, name string, finalizers []string, owners ...*corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Finalizers: finalizers}}
	for _, o := range owners {
		c.OwnerReferences = append(c.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: o.Name, UID: o.UID, BlockOwnerDeletion: ptr.To(true)})
	}
	out, err := cp.Client.Create(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return out.(*corev1.ConfigMap)
}

func del(t *testing.T, cp *controlplane.ControlPlane, name string, policy metav1.DeletionPropagation) {
	t.Helper()
	opts := &metav1.DeleteOptions{}
	if policy != "" {
		opts.PropagationPolicy = &policy
	}
	if err := cp.Client.Delete(context.Background(), controllerkit.MustKind("", "configmaps"), "default", name, opts); err != nil {
		t.Fatal(err)
	}
}

func gone(cp *controlplane.ControlPlane, name string) error {
	_, err := ct.TryGet[*corev1.ConfigMap](cp, "", "configmaps", "default", name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return ct.Errorf("%s still exists", name)
}

func TestBackgroundDeletesDependentsAfterOwner(t *testing.T) {
	cp, _ := setup(t)
	owner := cm(t, cp, "owner", nil)
	child := cm(t, cp, "child", nil, owner)
	cm(t, cp, "grandchild", nil, child)
	del(t, cp, "owner", "")
	ct.Wait(t, func() error {
		for _, n := range []string{"owner", "child", "grandchild"} {
			if err := gone(cp, n); err != nil {
				return err
			}
		}
		return nil
	})
}

func TestDanglingReferencesAreDropped(t *testing.T) {
	cp, _ := setup(t)
	live := cm(t, cp, "live", nil)
	ghost := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ghost", UID: types.UID("no-such-uid")}}
	cm(t, cp, "two-owners", nil, live, ghost)
	cm(t, cp, "only-ghost", nil, ghost)
	ct.Wait(t, func() error {
		if err := gone(cp, "only-ghost"); err != nil {
			return err
		}
		c, err := ct.TryGet[*corev1.ConfigMap](cp, "", "configmaps", "default", "two-owners")
		if err != nil {
			return err
		}
		if len(c.OwnerReferences) != 1 || c.OwnerReferences[0].UID != live.UID {
			return ct.Errorf("owner refs %+v", c.OwnerReferences)
		}
		return nil
	})
}

func TestForegroundWaitsForBlockingDependents(t *testing.T) {
	cp, ctx := setup(t)
	owner := cm(t, cp, "owner", nil)
	cm(t, cp, "held", []string{"test.skiff.sh/hold"}, owner) // stays Terminating until released
	cm(t, cp, "free", nil, owner)
	del(t, cp, "owner", metav1.DeletePropagationForeground)
	ct.Wait(t, func() error {
		if err := gone(cp, "free"); err != nil {
			return err
		}
		held, err := ct.TryGet[*corev1.ConfigMap](cp, "", "configmaps", "default", "held")
		if err != nil {
			return err
		}
		if held.DeletionTimestamp == nil {
			return ct.Errorf("blocking dependent not being deleted")
		}
		return nil
	})
	o := ct.Get[*corev1.ConfigMap](t, cp, "", "configmaps", "default", "owner")
	if o.DeletionTimestamp == nil || len(o.Finalizers) != 1 || o.Finalizers[0] != metav1.FinalizerDeleteDependents {
		t.Fatalf("owner should wait with the foregroundDeletion finalizer: %+v", o.ObjectMeta)
	}
	// Release the held dependent: then the owner goes too.
	ct.Wait(t, func() error {
		held, err := ct.TryGet[*corev1.ConfigMap](cp, "", "configmaps", "default", "held")
		if err != nil {
			return err
		}
		held.Finalizers = nil
		_, err = cp.Client.Update(ctx, held)
		return err
	})
	ct.Wait(t, func() error {
		if err := gone(cp, "held"); err != nil {
			return err
		}
		return gone(cp, "owner")
	})
}

func TestOrphanKeepsDependents(t *testing.T) {
	cp, _ := setup(t)
	owner := cm(t, cp, "owner", nil)
	cm(t, cp, "child", nil, owner)
	del(t, cp, "owner", metav1.DeletePropagationOrphan)
	ct.Wait(t, func() error { return gone(cp, "owner") })
	c := ct.Get[*corev1.ConfigMap](t, cp, "", "configmaps", "default", "child")
	if len(c.OwnerReferences) != 0 {
		t.Fatalf("orphan still references its owner: %+v", c.OwnerReferences)
	}
}

// The collector's check of a new dependent continues the trace of the write that made it (a
// pod's check is part of its rollout's trace), not a trace of its own.
func TestADependentsCheckContinuesItsWritesTrace(t *testing.T) {
	exp, tp := tracingtest.InMemory(t)
	cp, _ := setup(t)
	owner := cm(t, cp, "owner", nil)
	ctx, write := tp.Tracer("test").Start(context.Background(), "rollout")
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
	if _, err := cp.Client.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	write.End()
	ct.Wait(t, func() error {
		for _, s := range exp.GetSpans() {
			if s.Name == "reconcile "+garbagecollector.Name && attrOf(s.Attributes, "skiff.key") == "core/configmaps/default/dependent" {
				if s.SpanContext.TraceID() != write.SpanContext().TraceID() {
					return ct.Errorf("the check of dependent is in trace %s, not the write's %s", s.SpanContext.TraceID(), write.SpanContext().TraceID())
				}
				return nil
			}
		}
		return ct.Errorf("no check of dependent yet")
	})
}

func attrOf(kvs []attribute.KeyValue, key string) string {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}
