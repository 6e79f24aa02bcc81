// Package serviceaccount keeps what every namespace gets from kube-controller-manager for
// in-cluster API access: the `default` ServiceAccount (the serviceaccounts controller) and the
// `kube-root-ca.crt` ConfigMap holding the CA the apiserver's serving certificate chains to
// (the root-ca-cert-publisher). Both recreate their object when it is deleted and put it back
// when it is edited.
package serviceaccount

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
)

// perNamespace is a controller keyed by namespace that keeps one named object in each open
// namespace: it wakes on the namespace and on any change to an object of that name.
type perNamespace struct {
	name    string // controller name
	object  string // the kept object's name
	nss     *informer.Informer
	objs    *informer.Informer
	queue   *controllerkit.Queue
	workers int
	// ensure creates or repairs the object in ns; cur is the cached one (nil if absent).
	ensure func(ctx context.Context, ns string, cur runtime.Object) error
}

func (p *perNamespace) producer(cfg controllerkit.Config) func() actorkit.Actor {
	p.queue = &controllerkit.Queue{}
	objChanged := func(o runtime.Object) {
		if m := controllerkit.Meta(o); m.GetName() == p.object {
			p.queue.Add(m.GetNamespace())
		}
	}
	nsChanged := func(o runtime.Object) { p.queue.Add(controllerkit.Meta(o).GetName()) }
	ctl := &controllerkit.Controller{
		Name:    p.name,
		Workers: p.workers,
		Watches: []controllerkit.Watch{
			{Informer: p.nss, Handler: informer.Funcs{Add: nsChanged, Update: func(_, o runtime.Object) { nsChanged(o) }}},
			{Informer: p.objs, Handler: controllerkit.OnChange(objChanged)},
		},
		Queue:     p.queue,
		Reconcile: p.reconcile,
		Resync:    controllerkit.ForEach(p.nss, nsChanged),
		Logger:    cfg.Logger,
	}
	return ctl.Producer()
}

func (p *perNamespace) reconcile(ctx context.Context, ns string) error {
	o, ok := p.nss.Get("", ns)
	if !ok || o.(*corev1.Namespace).DeletionTimestamp != nil {
		return nil // gone or going: nothing may be created in it
	}
	cur, _ := p.objs.Get(ns, p.object)
	err := p.ensure(ctx, ns, cur)
	// The namespace went away (or started terminating) meanwhile; its next event says so.
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
