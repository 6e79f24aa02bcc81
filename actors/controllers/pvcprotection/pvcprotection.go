// Package pvcprotection is Kubernetes' PVC protection controller: a claim carries the
// kubernetes.io/pvc-protection finalizer (the apiserver adds it on create), and once the
// claim is deleted the finalizer is removed only when no pod that may still run names it, so
// a claim (and with it its volume and data) never goes from under a running pod.
package pvcprotection

import (
	"context"
	"net/url"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/schemas/defaults"
)

// Name is the controller's name in logs.
const Name = "pvc-protection-controller"

// Finalizer is the one Kubernetes names.
const Finalizer = defaults.PVCProtectionFinalizer

// byClaim indexes pods by the "ns/claim" of their persistentVolumeClaim volumes.
const byClaim = "pvc"

type controller struct {
	cfg    controllerkit.Config
	claims informer.Typed[*corev1.PersistentVolumeClaim]
	pods   informer.Typed[*corev1.Pod]
	queue  *controllerkit.Queue
}

// New returns the producer of the controller actor; its queue holds claim keys.
func New(cfg controllerkit.Config) func() actorkit.Actor {
	c := &controller{
		cfg:    cfg,
		claims: informer.Shared[*corev1.PersistentVolumeClaim](cfg.Informers, "", "persistentvolumeclaims"),
		pods:   informer.Shared[*corev1.Pod](cfg.Informers, "", "pods"),
		queue:  &controllerkit.Queue{},
	}
	c.pods.AddIndexer(byClaim, claimKeys)
	onClaim := func(o runtime.Object) {
		if pvc := o.(*corev1.PersistentVolumeClaim); pvc.DeletionTimestamp != nil && slices.Contains(pvc.Finalizers, Finalizer) {
			c.queue.Add(controllerkit.KeyOf(pvc))
		}
	}
	// A pod that ends or goes may free the claims it names.
	onPod := func(o runtime.Object) {
		for _, k := range claimKeys(o.(*corev1.Pod)) {
			c.queue.Add(k)
		}
	}
	ctl := &controllerkit.Controller{
		Name:    Name,
		Workers: cfg.Workers,
		Watches: []controllerkit.Watch{
			{Informer: c.claims.Informer(), Handler: informer.Funcs{Add: onClaim, Update: func(_, o runtime.Object) { onClaim(o) }}},
			{Informer: c.pods.Informer(), Handler: informer.Funcs{Update: func(_, o runtime.Object) {
				if !mayRun(o.(*corev1.Pod)) {
					onPod(o)
				}
			}, Delete: onPod}},
		},
		Queue:     c.queue,
		Reconcile: c.sync,
		Resync:    controllerkit.ForEach(c.claims.Informer(), onClaim),
		Logger:    cfg.Logger,
	}
	return ctl.Producer()
}

func claimKeys(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, controllerkit.Key(p.Namespace, v.PersistentVolumeClaim.ClaimName))
		}
	}
	return out
}

// mayRun: a pod that has not ended (kube's test for a pod still using a claim).
func mayRun(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func (c *controller) sync(ctx context.Context, key string) error {
	ns, name := controllerkit.SplitKey(key)
	pvc, ok := c.claims.Get(ns, name)
	if !ok || pvc.DeletionTimestamp == nil || !slices.Contains(pvc.Finalizers, Finalizer) {
		return nil
	}
	for _, p := range c.pods.ByIndex(byClaim, key) {
		if mayRun(p) {
			return nil // its end or deletion requeues the claim
		}
	}
	// The cache may not hold a pod created a moment ago: ask the apiserver before letting go,
	// as kube's controller does.
	if used, err := c.usedLive(ctx, pvc); err != nil || used {
		return err
	}
	next := pvc.DeepCopy()
	next.Finalizers = slices.DeleteFunc(next.Finalizers, func(f string) bool { return f == Finalizer })
	_, err := c.cfg.Client.Update(ctx, next)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *controller) usedLive(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	objs, _, err := c.cfg.Client.List(ctx, controllerkit.MustKind("", "pods"), pvc.Namespace, url.Values{})
	if err != nil {
		return false, err
	}
	for _, p := range controllerkit.Pods(objs) {
		if mayRun(p) && slices.Contains(claimKeys(p), controllerkit.KeyOf(pvc)) {
			return true, nil
		}
	}
	return false, nil
}
