// Package deployment is the Deployment controller: it rolls a Deployment's pod template out
// through ReplicaSets named by the template's hash (RollingUpdate within maxSurge and
// maxUnavailable, or Recreate), keeps revisions for rollback, and reports progress.
package deployment

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
const Name = "deployment-controller"

// Annotations and labels shared with kubectl (rollout history/undo read them).
const (
	RevisionAnnotation        = "deployment.kubernetes.io/revision"
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	MaxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
	HashLabel                 = appsv1.DefaultDeploymentUniqueLabelKey // "pod-template-hash"
)

// Condition reasons, as Kubernetes names them.
const (
	ReasonNewRSCreated      = "NewReplicaSetCreated"
	ReasonFoundNewRS        = "FoundNewReplicaSet"
	ReasonRSUpdated         = "ReplicaSetUpdated"
	ReasonNewRSAvailable    = "NewReplicaSetAvailable"
	ReasonTimedOut          = "ProgressDeadlineExceeded"
	ReasonPaused            = "DeploymentPaused"
	ReasonResumed           = "DeploymentResumed"
	ReasonMinAvailable      = "MinimumReplicasAvailable"
	ReasonMinUnavailable    = "MinimumReplicasUnavailable"
	ReasonScalingReplicaSet = "ScalingReplicaSet"
)

// Config configures the controller.
type Config = controllerkit.Config

var (
	gvk   = appsv1.SchemeGroupVersion.WithKind("Deployment")
	rsGVK = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
)

type controller struct {
	client *apiclient.Client
	deps   *informer.Informer
	rss    *informer.Informer
	pods   *informer.Informer
	queue  *controllerkit.Queue
	rec    *events.Recorder
	now    func() time.Time
}

// New returns the producer of the Deployment controller actor.
func New(cfg Config) func() actorkit.Actor {
	c := &controller{
		client: cfg.Client,
		deps:   cfg.Informers.For("apps", "deployments"),
		rss:    controllerkit.IndexOwners(cfg.Informers.For("apps", "replicasets")),
		pods:   controllerkit.IndexOwners(cfg.Informers.For("", "pods")),
		queue:  &controllerkit.Queue{},
		rec:    events.New(cfg.Client, Name, ""),
		now:    time.Now,
	}
	ctl := &controllerkit.Controller{
		Name:    Name,
		Workers: cfg.Workers,
		Watches: []controllerkit.Watch{
			{Informer: c.deps, Handler: controllerkit.OnChange(c.queue.Enqueue)},
			{Informer: c.rss, Handler: informer.Funcs{
				Add:    func(o runtime.Object) { c.rsChanged(nil, o.(*appsv1.ReplicaSet)) },
				Update: func(old, o runtime.Object) { c.rsChanged(old.(*appsv1.ReplicaSet), o.(*appsv1.ReplicaSet)) },
				Delete: func(o runtime.Object) { c.rsChanged(nil, o.(*appsv1.ReplicaSet)) },
			}},
			// Recreate waits for the old pods to be gone.
			{Informer: c.pods, Handler: informer.Funcs{Delete: func(o runtime.Object) { c.podDeleted(o.(*corev1.Pod)) }}},
		},
		Queue:     c.queue,
		Reconcile: c.sync,
		Resync:    controllerkit.ForEach(c.deps, c.queue.Enqueue),
		Logger:    cfg.Logger,
	}
	return ctl.Producer()
}

// ownerOf resolves a controller reference to a cached Deployment with the same UID.
func (c *controller) ownerOf(ns string, ref *metav1.OwnerReference) *appsv1.Deployment {
	d, _ := controllerkit.Owner[*appsv1.Deployment](c.deps, ns, ref, gvk.Kind)
	return d
}

func (c *controller) rsChanged(old, rs *appsv1.ReplicaSet) {
	if old != nil {
		if oref := metav1.GetControllerOf(old); oref != nil {
			if d := c.ownerOf(old.Namespace, oref); d != nil {
				c.queue.Add(controllerkit.KeyOf(d))
			}
		}
	}
	if ref := metav1.GetControllerOf(rs); ref != nil {
		if d := c.ownerOf(rs.Namespace, ref); d != nil {
			c.queue.Add(controllerkit.KeyOf(d))
		}
		return
	}
	// An orphan: whoever selects it may adopt it.
	for _, d := range controllerkit.Selecting(c.deps, rs.Namespace, labels.Set(rs.Labels), deploymentSelector) {
		c.queue.Add(controllerkit.KeyOf(d))
	}
}

func deploymentSelector(d *appsv1.Deployment) *metav1.LabelSelector { return d.Spec.Selector }

func (c *controller) podDeleted(p *corev1.Pod) {
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != rsGVK.Kind {
		return
	}
	o, ok := c.rss.Get(p.Namespace, ref.Name)
	if !ok {
		return
	}
	rs := o.(*appsv1.ReplicaSet)
	if d := c.ownerOf(rs.Namespace, metav1.GetControllerOf(rs)); d != nil && d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		c.queue.Add(controllerkit.KeyOf(d))
	}
}
