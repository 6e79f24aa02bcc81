package apiserver_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A controller-runtime controller watching pods for their metadata only (builder.OnlyMetadata)
// reconciles adds, updates and deletes, reading PartialObjectMetadata from its cache; the
// uncached reader lists PartialObjectMetadata.
func TestControllerRuntimeMetadataOnlyWatch(t *testing.T) {
	objs := podObjects(t)
	objs.create("a")
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cfg, ft := formatConfig(objs.a.base, true)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	log := &informerLog{}
	err = builder.ControllerManagedBy(mgr).Named("pod-metadata").For(&corev1.Pod{}, builder.OnlyMetadata).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			p := &metav1.PartialObjectMetadata{}
			p.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
			switch err := mgr.GetClient().Get(ctx, req.NamespacedName, p); {
			case apierrors.IsNotFound(err):
				log.add("gone " + req.Name)
			case err != nil:
				return reconcile.Result{}, err
			default:
				log.add(p.Name + "/" + p.Labels["m"])
			}
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	log.waitFor(t, "a/")
	objs.create("b")
	log.waitFor(t, "b/")
	objs.relabel("b", "y")
	log.waitFor(t, "b/y")
	objs.remove("a")
	log.waitFor(t, "gone a")
	if n := ft.lists.Load(); n != 1 {
		t.Fatalf("the metadata cache listed pods %d times: its watch failed", n)
	}

	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := mgr.GetAPIReader().List(ctx, l, client.InNamespace("default")); err != nil || len(l.Items) != 1 || l.Items[0].Name != "b" {
		t.Fatalf("uncached metadata list: %+v %v", l.Items, err)
	}
}
