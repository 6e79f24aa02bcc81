// Package replicaset is the ReplicaSet controller: it keeps spec.replicas pods of each
// ReplicaSet alive, adopts and releases pods by selector, and reports status.
package replicaset

import (
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/events"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Name is the controller's name in Events and logs.
const Name = "replicaset-controller"

// BurstReplicas caps the creates or deletes of one sync, as kube-controller-manager does.
const BurstReplicas = 500

// Config configures the controller.
type Config = controllerkit.Config

var gvk = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

type controller struct {
	client *apiclient.Client
	rss    *informer.Informer
	pods   *informer.Informer
	queue  *controllerkit.Queue
	exp    *controllerkit.Expectations
	podCtl controllerkit.PodControl
	rec    *events.Recorder
	now    func() time.Time
	logger *slog.Logger
}

// New returns the producer of the ReplicaSet controller actor.
func New(cfg Config) func() actorkit.Actor {
	c := &controller{
		client: cfg.Client,
		rss:    cfg.Informers.For("apps", "replicasets"),
		pods:   controllerkit.IndexReadyOwned(controllerkit.IndexOwners(cfg.Informers.For("", "pods"))),
		queue:  &controllerkit.Queue{},
		exp:    controllerkit.NewExpectations(),
		rec:    events.New(cfg.Client, Name, ""),
		now:    time.Now,
		logger: cfg.Logger,
	}
	c.podCtl = controllerkit.PodControl{Client: cfg.Client, Recorder: c.rec}
	ctl := &controllerkit.Controller{
		Name:    Name,
		Workers: cfg.Workers,
		Watches: []controllerkit.Watch{
			{Informer: c.rss, Handler: informer.Funcs{
				Add:    func(o runtime.Object) { c.enqueueRS(o.(*appsv1.ReplicaSet)) },
				Update: func(old, o runtime.Object) { c.replicaSetUpdated(old.(*appsv1.ReplicaSet), o.(*appsv1.ReplicaSet)) },
				Delete: func(o runtime.Object) {
					rs := o.(*appsv1.ReplicaSet)
					c.exp.Forget(controllerkit.KeyOf(rs))
					c.enqueueRS(rs)
				},
			}},
			{Informer: c.pods, Handler: informer.Funcs{
				Add:    func(o runtime.Object) { c.podAdded(o.(*corev1.Pod)) },
				Update: func(old, o runtime.Object) { c.podUpdated(old.(*corev1.Pod), o.(*corev1.Pod)) },
				Delete: func(o runtime.Object) { c.podDeleted(o.(*corev1.Pod)) },
			}},
		},
		Queue:     c.queue,
		Reconcile: c.sync,
		Resync:    controllerkit.ForEach(c.rss, func(o runtime.Object) { c.enqueueRS(o.(*appsv1.ReplicaSet)) }),
		Logger:    cfg.Logger,
	}
	return ctl.Producer()
}

func (c *controller) enqueueRS(rs *appsv1.ReplicaSet) { c.queue.Add(controllerkit.KeyOf(rs)) }
