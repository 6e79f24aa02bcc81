// Package persistentvolume is the PersistentVolume controller, as kube-controller-manager's
// binder: it binds claims to volumes (capacity, access modes, class, selector; a volume's
// node affinity for a claim the scheduler gave a node), keeps both phases
// (Pending/Bound/Lost; Available/Bound/Released/Failed), reclaims released volumes (Retain
// keeps them, Delete removes them) and, as the built-in local-path provisioner, creates a
// node-local volume for a claim of its class once the scheduler has picked the node
// (volume.kubernetes.io/selected-node). The directory itself is the node's business: its
// kubelet makes it on first mount and removes it once the volume is gone (see
// actors/kubelet/volumes/localpath.go).
package persistentvolume

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/events"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Name is the controller's name in events and logs, as Kubernetes names it.
const Name = "persistentvolume-controller"

// Annotations as Kubernetes' binder and provisioners write them.
const (
	AnnBoundByController = "pv.kubernetes.io/bound-by-controller"
	AnnBindCompleted     = "pv.kubernetes.io/bind-completed"
	AnnProvisionedBy     = "pv.kubernetes.io/provisioned-by"
)

// byClaim indexes volumes by the "ns/name" of their claimRef, and unbound claims by class.
const byClaim = "claim"

// resyncEvery re-checks every claim and volume, as kube's binder does (15 s).
const resyncEvery = 15 * time.Second

type controller struct {
	cfg     controllerkit.Config
	claims  informer.Typed[*corev1.PersistentVolumeClaim]
	volumes informer.Typed[*corev1.PersistentVolume]
	classes informer.Typed[*storagev1.StorageClass]
	nodes   informer.Typed[*corev1.Node]
	queue   *controllerkit.Queue
	rec     *events.Recorder
}

// New returns the producer of the controller actor. Its work queue holds claims ("ns/name")
// and volumes ("name": cluster-scoped, so no slash).
func New(cfg controllerkit.Config) func() actorkit.Actor {
	c := &controller{
		cfg:     cfg,
		claims:  informer.Shared[*corev1.PersistentVolumeClaim](cfg.Informers, "", "persistentvolumeclaims"),
		volumes: informer.Shared[*corev1.PersistentVolume](cfg.Informers, "", "persistentvolumes"),
		classes: informer.Shared[*storagev1.StorageClass](cfg.Informers, storagev1.GroupName, "storageclasses"),
		nodes:   informer.Shared[*corev1.Node](cfg.Informers, "", "nodes"),
		queue:   &controllerkit.Queue{},
		rec:     events.New(cfg.Client, Name, ""),
	}
	c.volumes.AddIndexer(byClaim, func(pv *corev1.PersistentVolume) []string {
		if r := pv.Spec.ClaimRef; r != nil {
			return []string{controllerkit.Key(r.Namespace, r.Name)}
		}
		return nil
	})
	IndexByClass(c.volumes)
	c.claims.AddIndexer(ByClass, func(pvc *corev1.PersistentVolumeClaim) []string {
		if pvc.Spec.VolumeName != "" {
			return nil
		}
		return []string{claimClass(pvc)}
	})
	enqueue := func(o runtime.Object) { c.queue.Add(controllerkit.KeyOf(controllerkit.Meta(o))) }
	// A volume's change concerns its claim too (a provisioned or released volume), and an
	// available volume the unbound claims of its class.
	onVolume := func(o runtime.Object) {
		pv := o.(*corev1.PersistentVolume)
		c.queue.Add(pv.Name)
		if r := pv.Spec.ClaimRef; r != nil {
			c.queue.Add(controllerkit.Key(r.Namespace, r.Name))
		} else if pv.Status.Phase == corev1.VolumeAvailable {
			for _, pvc := range c.claims.ByIndex(ByClass, pv.Spec.StorageClassName) {
				c.queue.Add(controllerkit.KeyOf(pvc))
			}
		}
	}
	// A deleted claim releases its volume.
	onClaimDelete := func(o runtime.Object) {
		pvc := o.(*corev1.PersistentVolumeClaim)
		for _, pv := range c.volumes.ByIndex(byClaim, controllerkit.KeyOf(pvc)) {
			c.queue.Add(pv.Name)
		}
	}
	ctl := &controllerkit.Controller{
		Name:    Name,
		Workers: cfg.Workers,
		Watches: []controllerkit.Watch{
			{Informer: c.claims.Informer(), Handler: informer.Funcs{Add: enqueue, Update: func(_, o runtime.Object) { enqueue(o) }, Delete: onClaimDelete}},
			{Informer: c.volumes.Informer(), Handler: informer.Funcs{Add: onVolume, Update: func(_, o runtime.Object) { onVolume(o) }, Delete: onVolume}},
		},
		WaitFor:   []*informer.Informer{c.classes.Informer(), c.nodes.Informer()},
		Queue:     c.queue,
		Reconcile: c.sync,
		Resync: func() {
			controllerkit.ForEach(c.claims.Informer(), enqueue)()
			controllerkit.ForEach(c.volumes.Informer(), enqueue)()
		},
		ResyncEvery: resyncEvery,
		Logger:      cfg.Logger,
	}
	return ctl.Producer()
}

func isClaimKey(key string) bool { return strings.Contains(key, "/") }
