// Package daemonset is the DaemonSet controller: one pod per eligible node, placed by setting
// spec.nodeName directly at creation (no scheduler round-trip), and rolling updates.
package daemonset

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/events"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Name is the controller's name in Events and logs.
const Name = "daemonset-controller"

// HashLabel carries the hash of the template a pod was made from.
const HashLabel = appsv1.DefaultDaemonSetUniqueLabelKey // "controller-revision-hash"

// Config configures the controller.
type Config = controllerkit.Config

var gvk = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

type controller struct {
	client *apiclient.Client
	dss    *informer.Informer
	nodes  *informer.Informer
	pods   *informer.Informer
	queue  *controllerkit.Queue
	exp    *controllerkit.Expectations
	podCtl controllerkit.PodControl
	now    func() time.Time
}

// New returns the producer of the DaemonSet controller actor.
func New(cfg Config) func() actorkit.Actor {
	rec := events.New(cfg.Client, Name, "")
	c := &controller{
		client: cfg.Client,
		dss:    cfg.Informers.For("apps", "daemonsets"),
		nodes:  cfg.Informers.For("", "nodes"),
		pods:   controllerkit.IndexOwners(cfg.Informers.For("", "pods")),
		queue:  &controllerkit.Queue{},
		exp:    controllerkit.NewExpectations(),
		podCtl: controllerkit.PodControl{Client: cfg.Client, Recorder: rec},
		now:    time.Now,
	}
	enqueue := c.queue.Enqueue
	resync := controllerkit.ForEach(c.dss, enqueue)
	dss := controllerkit.OnChange(enqueue)
	dss.Delete = func(o runtime.Object) { c.exp.Forget(controllerkit.KeyOf(controllerkit.Meta(o))) }
	// A node added or removed, or changed in what placement reads, can change where every
	// DaemonSet belongs; a heartbeat cannot.
	nodes := informer.Funcs{
		Add: func(runtime.Object) { resync() },
		Update: func(old, o runtime.Object) {
			if placementChanged(old.(*corev1.Node), o.(*corev1.Node)) {
				resync()
			}
		},
		Delete: func(runtime.Object) { resync() },
	}
	pods := informer.Funcs{
		Add: func(o runtime.Object) {
			p := o.(*corev1.Pod)
			if p.DeletionTimestamp != nil {
				c.podGone(p)
			} else if ds := c.owner(p); ds != nil {
				c.exp.CreationObserved(controllerkit.KeyOf(ds))
				enqueue(ds)
			}
		},
		Update: func(old, o runtime.Object) {
			p := o.(*corev1.Pod)
			if p.DeletionTimestamp != nil && old.(*corev1.Pod).DeletionTimestamp == nil {
				c.podGone(p)
			} else if ds := c.owner(p); ds != nil {
				enqueue(ds)
			}
		},
		Delete: func(o runtime.Object) { c.podGone(o.(*corev1.Pod)) },
	}
	ctl := &controllerkit.Controller{
		Name: Name, Workers: cfg.Workers, Logger: cfg.Logger,
		Watches:   []controllerkit.Watch{{Informer: c.dss, Handler: dss}, {Informer: c.nodes, Handler: nodes}, {Informer: c.pods, Handler: pods}},
		Queue:     c.queue,
		Reconcile: c.sync,
		Resync:    resync,
	}
	return ctl.Producer()
}

func (c *controller) owner(p *corev1.Pod) *appsv1.DaemonSet {
	ds, _ := controllerkit.Owner[*appsv1.DaemonSet](c.dss, p.Namespace, metav1.GetControllerOf(p), gvk.Kind)
	return ds
}

func (c *controller) podGone(p *corev1.Pod) {
	if ds := c.owner(p); ds != nil {
		key := controllerkit.KeyOf(ds)
		c.exp.DeletionObserved(key, controllerkit.KeyOf(p))
		c.queue.Add(key)
	}
}
