package operator_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/testkit/operator"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

func TestOperatorConvergesOnSkiff(t *testing.T) {
	cp := testutil.StartControlPlane(t)
	cfg := &rest.Config{Host: cp.URL()}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	def := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal([]byte(operator.CRD), def); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, def); err != nil {
		t.Fatal(err)
	}
	wait(t, "the Widget CRD established", func() error {
		if err := c.Get(ctx, types.NamespacedName{Name: def.Name}, def); err != nil {
			return err
		}
		for _, cond := range def.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return errors.New("not established")
	})

	mgr, err := operator.NewManager(cfg, "default")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	wait(t, "the operator holding its Lease", func() error {
		var l coordinationv1.Lease
		if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: operator.LeaseName}, &l); err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return errors.New("no holder")
		}
		return nil
	})

	// Create: a Deployment owned by the Widget, and a Ready condition on the Widget's status.
	start := time.Now()
	w := operator.NewWidget()
	w.SetNamespace("default")
	w.SetName("w1")
	_ = unstructured.SetNestedField(w.Object, int64(2), "spec", "size")
	if err := c.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	converged(t, ctx, c, "w1", 2, 1)
	t.Logf("widget created to Deployment and status written: %v", time.Since(start))

	// Update: the Deployment follows, status reports the new generation.
	start = time.Now()
	if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "w1"}, w); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(w.Object, int64(3), "spec", "size")
	if err := c.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	converged(t, ctx, c, "w1", 3, 2)
	t.Logf("widget updated to Deployment and status converged: %v", time.Since(start))

	wait(t, "the operator's Event", func() error {
		var evs corev1.EventList
		if err := c.List(ctx, &evs, client.InNamespace("default")); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Widget" && e.InvolvedObject.Name == "w1" && e.Reason == "DeploymentSynced" {
				return nil
			}
		}
		return errors.New("no DeploymentSynced event")
	})

	// Delete: the owned Deployment is garbage-collected.
	start = time.Now()
	if err := c.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	wait(t, "the owned Deployment collected", func() error {
		err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "w1"}, &appsv1.Deployment{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	t.Logf("widget deleted to its Deployment gone: %v", time.Since(start))
}

// converged waits until the Widget's Deployment runs size replicas under the Widget's
// controller reference, and its status says so for generation gen.
func converged(t *testing.T, ctx context.Context, c client.Client, name string, size int32, gen int64) {
	t.Helper()
	wait(t, fmt.Sprintf("%s converged at size %d", name, size), func() error {
		w := operator.NewWidget()
		if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, w); err != nil {
			return err
		}
		var d appsv1.Deployment
		if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, &d); err != nil {
			return err
		}
		refs := d.OwnerReferences
		if d.Spec.Replicas == nil || *d.Spec.Replicas != size || len(refs) != 1 || refs[0].UID != w.GetUID() || refs[0].Controller == nil || !*refs[0].Controller {
			return fmt.Errorf("deployment %v owners %v", d.Spec.Replicas, refs)
		}
		replicas, _, _ := unstructured.NestedInt64(w.Object, "status", "replicas")
		conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
		if replicas != int64(size) || len(conds) != 1 {
			return fmt.Errorf("status %v", w.Object["status"])
		}
		cond := conds[0].(map[string]any)
		if cond["type"] != "Ready" || cond["status"] != "True" || cond["observedGeneration"] != gen {
			return fmt.Errorf("condition %v, want Ready for generation %d", cond, gen)
		}
		return nil
	})
}

// wait polls f until it holds (the cluster converges asynchronously), naming what failed.
func wait(t *testing.T, what string, f func() error) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, 20*time.Millisecond, func() error {
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}
