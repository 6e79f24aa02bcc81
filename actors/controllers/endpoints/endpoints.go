// Package endpoints keeps core/v1 Endpoints for every Service with a selector, derived from the
// Service's EndpointSlices rather than from its pods again: the slices already hold the
// selection, readiness and resolved ports, and they are what the proxies route by, so the
// Endpoints a user reads can never disagree with what is routed. (Kubernetes' endpoints
// controller computes them from pods; its mirroring controller goes the other way, from
// user-managed Endpoints to slices, which Skiff does not do.) Endpoints of a Service without a
// selector are the user's and left alone.
package endpoints

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/controllers/endpointslice"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Name is the controller's name in logs.
const Name = "endpoints-controller"

// MaxAddresses is how many addresses an Endpoints object holds at most, as in Kubernetes; past
// it the rest are left out and the object is annotated as truncated.
const MaxAddresses = 1000

// Config configures the controller.
type Config = controllerkit.Config

type controller struct {
	client *apiclient.Client
	svcs   *informer.Informer
	slices *informer.Informer
	eps    *informer.Informer
	queue  *controllerkit.Queue
}

// New returns the producer of the Endpoints controller actor.
func New(cfg Config) func() actorkit.Actor {
	c := &controller{
		client: cfg.Client,
		svcs:   cfg.Informers.For("", "services"),
		slices: controllerkit.IndexOwners(cfg.Informers.For("discovery.k8s.io", "endpointslices")),
		eps:    cfg.Informers.For("", "endpoints"),
		queue:  &controllerkit.Queue{},
	}
	slice := func(o runtime.Object) {
		s := o.(*discoveryv1.EndpointSlice)
		if svc := s.Labels[discoveryv1.LabelServiceName]; svc != "" && s.Labels[discoveryv1.LabelManagedBy] == endpointslice.ManagedBy {
			c.queue.Add(controllerkit.Key(s.Namespace, svc))
		}
	}
	ctl := &controllerkit.Controller{
		Name:    Name,
		Workers: cfg.Workers,
		Watches: []controllerkit.Watch{
			{Informer: c.svcs, Handler: controllerkit.OnChange(c.queue.Enqueue)},
			{Informer: c.slices, Handler: controllerkit.OnChange(slice)},
			// Someone else's edit of a controlled Endpoints is put back.
			{Informer: c.eps, Handler: controllerkit.OnChange(c.queue.Enqueue)},
		},
		Queue:     c.queue,
		Reconcile: c.sync,
		Resync:    controllerkit.ForEach(c.svcs, c.queue.Enqueue),
		Logger:    cfg.Logger,
	}
	return ctl.Producer()
}

var endpointsKind = controllerkit.MustKind("", "endpoints")

func isOurs(s *discoveryv1.EndpointSlice, svc *corev1.Service) bool {
	return s.Labels[discoveryv1.LabelManagedBy] == endpointslice.ManagedBy && s.Labels[discoveryv1.LabelServiceName] == svc.Name
}
