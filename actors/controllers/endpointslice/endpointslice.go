// Package endpointslice keeps, for every Service with a selector, EndpointSlices listing the
// pods it selects: an endpoint per pod with an IP, with ready/serving/terminating conditions,
// node name, a reference to the pod, and the Service's ports resolved against each pod.
package endpointslice

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/events"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/internal/tracing"
)

// Name is the controller's name in logs; ManagedBy is the value of the managed-by label on
// the slices it owns, as in Kubernetes.
const (
	Name      = "endpointslice-controller"
	ManagedBy = "endpointslice-controller.k8s.io"
)

// MaxEndpointsPerSlice is Kubernetes' default.
const MaxEndpointsPerSlice = 100

// Config configures the controller.
type Config = controllerkit.Config

type controller struct {
	client *apiclient.Client
	svcs   *informer.Informer
	pods   *informer.Informer
	slices *informer.Informer
	queue  *controllerkit.Queue
	// exp holds back a Service's sync while its slice creates and deletes are not in the cache
	// yet: acting on that stale view would create duplicates.
	exp *controllerkit.Expectations
	// links: the pod writes that woke each Service, for its sync's span.
	links tracing.Links
	rec   *events.Recorder
}

var svcGVK = corev1.SchemeGroupVersion.WithKind("Service")

// New returns the producer of the EndpointSlice controller actor.
func New(cfg Config) func() actorkit.Actor {
	c := &controller{
		client: cfg.Client,
		svcs:   cfg.Informers.For("", "services"),
		pods:   cfg.Informers.For("", "pods"),
		slices: controllerkit.IndexOwners(cfg.Informers.For("discovery.k8s.io", "endpointslices")),
		queue:  &controllerkit.Queue{},
		exp:    controllerkit.NewExpectations(),
		rec:    events.New(cfg.Client, Name, ""),
	}
	svcs := controllerkit.OnChange(c.queue.Enqueue)
	svcs.Delete = func(o runtime.Object) { c.exp.Forget(controllerkit.KeyOf(controllerkit.Meta(o))) }
	pods := informer.Funcs{
		Add:    func(o runtime.Object) { c.podChanged(o.(*corev1.Pod)) },
		Update: func(old, o runtime.Object) { c.podChanged(old.(*corev1.Pod)); c.podChanged(o.(*corev1.Pod)) },
		Delete: func(o runtime.Object) { c.podChanged(o.(*corev1.Pod)) },
	}
	// Someone else editing or deleting our slices: put them back.
	sliceChanged := func(o runtime.Object, observe func(svcKey, slice string)) {
		s := o.(*discoveryv1.EndpointSlice)
		if s.Labels[discoveryv1.LabelManagedBy] == ManagedBy && s.Labels[discoveryv1.LabelServiceName] != "" {
			key := controllerkit.Key(s.Namespace, s.Labels[discoveryv1.LabelServiceName])
			if observe != nil {
				observe(key, controllerkit.KeyOf(s))
			}
			c.queue.Add(key)
		}
	}
	slices := informer.Funcs{
		Add:    func(o runtime.Object) { sliceChanged(o, func(k, _ string) { c.exp.CreationObserved(k) }) },
		Update: func(_, o runtime.Object) { sliceChanged(o, nil) },
		Delete: func(o runtime.Object) { sliceChanged(o, c.exp.DeletionObserved) },
	}
	ctl := &controllerkit.Controller{
		Name:      Name,
		Workers:   cfg.Workers,
		Watches:   []controllerkit.Watch{{Informer: c.svcs, Handler: svcs}, {Informer: c.pods, Handler: pods}, {Informer: c.slices, Handler: slices}},
		Queue:     c.queue,
		Reconcile: c.reportingSync,
		Resync:    controllerkit.ForEach(c.svcs, c.queue.Enqueue),
		Logger:    cfg.Logger,
	}
	return ctl.Producer()
}

// podChanged wakes every Service of the pod's namespace that selects it.
func (c *controller) podChanged(p *corev1.Pod) {
	for _, o := range c.svcs.ByIndex(informer.IndexNamespace, p.Namespace) {
		s := o.(*corev1.Service)
		if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.Labels)) {
			key := controllerkit.KeyOf(s)
			c.notePod(key, p.Namespace, p.Name)
			c.queue.Add(key)
		}
	}
}

func ownedBy(s *discoveryv1.EndpointSlice, svc *corev1.Service) bool {
	ref := metav1.GetControllerOf(s)
	return s.Labels[discoveryv1.LabelManagedBy] == ManagedBy && s.Labels[discoveryv1.LabelServiceName] == svc.Name &&
		ref != nil && ref.UID == svc.UID
}
