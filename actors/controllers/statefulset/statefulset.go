// Package statefulset is the StatefulSet controller: it keeps pods <set>-<ordinal> with stable
// names and hostnames, creates them in order (OrderedReady) or at once (Parallel), removes the
// highest ordinals first, gives each pod its claims from the volumeClaimTemplates (claims.go), rolls template changes out from the highest ordinal down to the
// partition, records each template as a ControllerRevision, and reports status.
package statefulset

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/events"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Name is the controller's name in Events and logs.
const Name = "statefulset-controller"

// Config configures the controller.
type Config = controllerkit.Config

var gvk = appsv1.SchemeGroupVersion.WithKind("StatefulSet")

type controller struct {
	client *apiclient.Client
	sets   *informer.Informer
	pods   *informer.Informer
	revs   *informer.Informer
	claims *informer.Informer
	queue  *controllerkit.Queue
	exp    *controllerkit.Expectations
	podCtl controllerkit.PodControl
	now    func() time.Time
}

// New returns the producer of the StatefulSet controller actor.
func New(cfg Config) func() actorkit.Actor {
	c := &controller{
		client: cfg.Client,
		sets:   cfg.Informers.For("apps", "statefulsets"),
		pods:   controllerkit.IndexOwners(cfg.Informers.For("", "pods")),
		revs:   controllerkit.IndexOwners(cfg.Informers.For("apps", "controllerrevisions")),
		claims: cfg.Informers.For("", "persistentvolumeclaims"),
		queue:  &controllerkit.Queue{},
		exp:    controllerkit.NewExpectations(),
		podCtl: controllerkit.PodControl{Client: cfg.Client, Recorder: events.New(cfg.Client, Name, "")},
		now:    time.Now,
	}
	sets := controllerkit.OnChange(c.queue.Enqueue)
	sets.Delete = func(o runtime.Object) {
		c.exp.Forget(controllerkit.KeyOf(controllerkit.Meta(o)))
		c.queue.Enqueue(o)
	}
	pods := informer.Funcs{
		Add:    func(o runtime.Object) { c.podChanged(nil, o.(*corev1.Pod)) },
		Update: func(old, o runtime.Object) { c.podChanged(old.(*corev1.Pod), o.(*corev1.Pod)) },
		Delete: func(o runtime.Object) { c.podDeleted(o.(*corev1.Pod)) },
	}
	// A revision changes nothing a set does by itself, but one deleted or orphaned by hand
	// must be recreated or adopted.
	revs := controllerkit.OnChange(func(o runtime.Object) {
		m := controllerkit.Meta(o)
		if s := c.owner(m.GetNamespace(), metav1.GetControllerOf(m)); s != nil {
			c.queue.Enqueue(s)
		}
	})
	// A claim going away lets a pod that waits for it be made (ensureClaims); claims carry
	// their set's selector labels.
	claims := controllerkit.OnChange(func(o runtime.Object) {
		m := controllerkit.Meta(o)
		for _, s := range controllerkit.Selecting(c.sets, m.GetNamespace(), labels.Set(m.GetLabels()),
			func(s *appsv1.StatefulSet) *metav1.LabelSelector { return s.Spec.Selector }) {
			if len(s.Spec.VolumeClaimTemplates) > 0 {
				c.queue.Enqueue(s)
			}
		}
	})
	ctl := &controllerkit.Controller{
		Name: Name, Workers: cfg.Workers, Logger: cfg.Logger,
		Watches: []controllerkit.Watch{
			{Informer: c.sets, Handler: sets},
			{Informer: c.pods, Handler: pods},
			{Informer: c.revs, Handler: revs},
			{Informer: c.claims, Handler: claims},
		},
		Queue:     c.queue,
		Reconcile: c.sync,
		Resync:    controllerkit.ForEach(c.sets, c.queue.Enqueue),
	}
	return ctl.Producer()
}

func (c *controller) owner(ns string, ref *metav1.OwnerReference) *appsv1.StatefulSet {
	s, _ := controllerkit.Owner[*appsv1.StatefulSet](c.sets, ns, ref, gvk.Kind)
	return s
}

// podChanged wakes the pod's set (or, for an orphan, the sets that may adopt it) and settles
// the expectations the change answers: a new pod is a create seen, a pod that starts
// terminating is a delete seen.
func (c *controller) podChanged(old, p *corev1.Pod) {
	s := c.owner(p.Namespace, metav1.GetControllerOf(p))
	if old != nil {
		if prev := c.owner(old.Namespace, metav1.GetControllerOf(old)); prev != nil && prev != s {
			c.queue.Enqueue(prev) // released or taken over
		}
	}
	if s == nil {
		if metav1.GetControllerOf(p) == nil && p.DeletionTimestamp == nil {
			for _, s := range controllerkit.Selecting(c.sets, p.Namespace, labels.Set(p.Labels),
				func(s *appsv1.StatefulSet) *metav1.LabelSelector { return s.Spec.Selector }) {
				c.queue.Enqueue(s)
			}
		}
		return
	}
	key := controllerkit.KeyOf(s)
	c.exp.PodChanged(key, old, p)
	c.queue.Add(key)
}

func (c *controller) podDeleted(p *corev1.Pod) {
	if s := c.owner(p.Namespace, metav1.GetControllerOf(p)); s != nil {
		key := controllerkit.KeyOf(s)
		c.exp.DeletionObserved(key, controllerkit.KeyOf(p))
		c.queue.Add(key)
	}
}
