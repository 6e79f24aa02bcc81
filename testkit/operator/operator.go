// Package operator is a Kubernetes operator built the usual way, with controller-runtime, used
// to prove Skiff runs operators: a manager (shared cache, leader election on a Lease, events)
// whose reconciler owns one Deployment per Widget and reports on the Widget's status
// subresource. It is test support only; nothing in Skiff imports it.
package operator

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// WidgetGVK is the kind the operator reconciles (CRD in CRD).
var WidgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

// LeaseName is the Lease the operator's replicas elect a leader on.
const LeaseName = "widget-operator"

// CRD is the Widget CustomResourceDefinition the operator needs.
const CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, minimum: 0, default: 1}
          status:
            type: object
            properties:
              replicas: {type: integer}
              conditions:
                type: array
                items: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// NewWidget returns an empty Widget for the client to fill.
func NewWidget() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(WidgetGVK)
	return u
}

// NewManager builds the operator's manager against cfg, its leader elected on a Lease in
// namespace; start it with Start.
func NewManager(cfg *rest.Config, namespace string) (ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		LeaderElection:          true,
		LeaderElectionID:        LeaseName,
		LeaderElectionNamespace: namespace,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
	})
	if err != nil {
		return nil, err
	}
	r := &reconciler{Client: mgr.GetClient(), scheme: scheme, events: mgr.GetEventRecorderFor("widget-operator")} //nolint:staticcheck // core/v1 Events: what Skiff serves
	err = ctrl.NewControllerManagedBy(mgr).For(NewWidget()).Owns(&appsv1.Deployment{}).Named("widget").Complete(r)
	return mgr, err
}

type reconciler struct {
	client.Client
	scheme *runtime.Scheme
	events record.EventRecorder
}

// Reconcile makes the Widget's Deployment run spec.size replicas and reports it in status.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := NewWidget()
	if err := r.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if w.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, nil // the garbage collector takes the Deployment
	}
	size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size")
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: w.GetName(), Namespace: w.GetNamespace()}}
	op, err := controllerutil.CreateOrUpdate(ctx, r.Client, dep, func() error {
		labels := map[string]string{"widget": w.GetName()}
		dep.Spec.Replicas = ptr.To(int32(size))
		if dep.Spec.Selector == nil {
			dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
		}
		dep.Spec.Template.Labels = labels
		dep.Spec.Template.Spec.Containers = []corev1.Container{{Name: "widget", Image: "skiff.local/httpecho:v1"}}
		return controllerutil.SetControllerReference(w, dep, r.scheme)
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	if op != controllerutil.OperationResultNone {
		r.events.Eventf(w, corev1.EventTypeNormal, "DeploymentSynced", "Deployment %s %s with %d replicas", dep.Name, op, size)
	}
	return ctrl.Result{}, r.writeStatus(ctx, w, size)
}

// writeStatus sets status.replicas and a Ready condition through the status subresource.
func (r *reconciler) writeStatus(ctx context.Context, w *unstructured.Unstructured, size int64) error {
	var conds []metav1.Condition
	if raw, ok, _ := unstructured.NestedSlice(w.Object, "status", "conditions"); ok {
		for _, c := range raw {
			var cond metav1.Condition
			if m, ok := c.(map[string]any); ok && runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cond) == nil {
				conds = append(conds, cond)
			}
		}
	}
	meta.SetStatusCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "DeploymentSynced",
		Message: fmt.Sprintf("Deployment runs %d replicas", size), ObservedGeneration: w.GetGeneration()})
	out := make([]any, 0, len(conds))
	for i := range conds {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&conds[i])
		if err != nil {
			return err
		}
		out = append(out, m)
	}
	if err := unstructured.SetNestedSlice(w.Object, out, "status", "conditions"); err != nil {
		return err
	}
	if err := unstructured.SetNestedField(w.Object, size, "status", "replicas"); err != nil {
		return err
	}
	return r.Status().Update(ctx, w) // a conflict requeues: the next reconcile reads the newer Widget
}
