package replicaset

import (
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// owner resolves a pod's controller reference to a ReplicaSet in the cache (same UID).
func (c *controller) owner(p *corev1.Pod, ref *metav1.OwnerReference) *appsv1.ReplicaSet {
	rs, _ := controllerkit.Owner[*appsv1.ReplicaSet](c.rss, p.Namespace, ref, gvk.Kind)
	return rs
}

// enqueueMatching wakes the ReplicaSets that might adopt an orphan pod.
func (c *controller) enqueueMatching(p *corev1.Pod) {
	for _, rs := range controllerkit.Selecting(c.rss, p.Namespace, labels.Set(p.Labels), func(rs *appsv1.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector }) {
		c.enqueueRS(rs)
	}
}

// countBatch is how long an event that only changes a ReplicaSet's counts may wait for its
// sync: a pod's readiness or status, and the ReplicaSet's own status write coming back. A sync
// walks every pod the ReplicaSet has, so one sync per such event costs a 30,000-pod
// ReplicaSet time quadratic in its size (and a status write's echo syncs again, which writes
// again, back to back); batched, it is at most one sync per window. kube-controller-manager's
// Job controller batches pod events the same way (syncJobBatchPeriod, 1 s). The window grows
// with the ReplicaSet, as the walk does (batchPerPod per pod: its batched syncs then take a
// few percent of a core whatever its size), from minCountBatch, so a small Deployment's rollout moves on
// promptly, to maxCountBatch: at a fixed 250 ms a ReplicaSet growing from 10,000 to 30,000
// pods took a tenth of the control plane's CPU in syncs. Events the controller must act on
// promptly are not batched: a spec or metadata change of the ReplicaSet, the last awaited
// create or delete (the next batch of pods may start), a pod that stopped being active (its
// replacement), and changes of ownership or labels.
func countBatch(rs *appsv1.ReplicaSet) time.Duration {
	return min(max(time.Duration(rs.Status.Replicas)*batchPerPod, minCountBatch), maxCountBatch)
}

const (
	minCountBatch = 100 * time.Millisecond
	maxCountBatch = time.Second
	batchPerPod   = 33 * time.Microsecond // a sync's walk costs 1-3 µs a pod
)

// replicaSetUpdated syncs a ReplicaSet whose spec or metadata changed at once; one whose
// status alone moved (its own write, mostly) within its countBatch.
func (c *controller) replicaSetUpdated(old, cur *appsv1.ReplicaSet) {
	if old.Generation == cur.Generation && reflect.DeepEqual(old.ObjectMeta.Labels, cur.ObjectMeta.Labels) &&
		old.DeletionTimestamp.Equal(cur.DeletionTimestamp) && reflect.DeepEqual(old.OwnerReferences, cur.OwnerReferences) &&
		reflect.DeepEqual(old.Finalizers, cur.Finalizers) {
		c.enqueueBatched(cur)
		return
	}
	c.enqueueRS(cur)
}

// enqueueBatched syncs rs within countBatch, once for every such call meanwhile.
func (c *controller) enqueueBatched(rs *appsv1.ReplicaSet) {
	c.queue.AddAfter(controllerkit.KeyOf(rs), countBatch(rs))
}

// enqueueCounted syncs rs for a pod create or delete it expected or counts: at once when no
// other is awaited any more, else within its countBatch.
func (c *controller) enqueueCounted(rs *appsv1.ReplicaSet) {
	if c.exp.Satisfied(controllerkit.KeyOf(rs)) {
		c.enqueueRS(rs)
		return
	}
	c.enqueueBatched(rs)
}

func (c *controller) podAdded(p *corev1.Pod) {
	if p.DeletionTimestamp != nil {
		// Seen for the first time already terminating (e.g. after a relist): a deletion.
		c.podDeleted(p)
		return
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		if rs := c.owner(p, ref); rs != nil {
			c.exp.CreationObserved(controllerkit.KeyOf(rs))
			c.enqueueCounted(rs)
		}
		return
	}
	c.enqueueMatching(p)
}

func (c *controller) podUpdated(old, cur *corev1.Pod) {
	if cur.DeletionTimestamp != nil && old.DeletionTimestamp == nil {
		// A terminating pod no longer counts; kube-controller-manager counts this as the deletion.
		c.podDeleted(cur)
		if !reflect.DeepEqual(old.Labels, cur.Labels) {
			c.enqueueMatching(old)
		}
		return
	}
	curRef, oldRef := metav1.GetControllerOf(cur), metav1.GetControllerOf(old)
	if oldRef != nil && (curRef == nil || oldRef.UID != curRef.UID) {
		if rs := c.owner(old, oldRef); rs != nil {
			c.enqueueRS(rs)
		}
	}
	if curRef == nil {
		c.enqueueMatching(cur)
		return
	}
	rs := c.owner(cur, curRef)
	if rs == nil {
		return
	}
	if oldRef == nil || oldRef.UID != curRef.UID || !reflect.DeepEqual(old.Labels, cur.Labels) || controllerkit.IsPodActive(old) != controllerkit.IsPodActive(cur) {
		c.enqueueRS(rs)
	} else {
		c.enqueueBatched(rs) // readiness or status only: counts
	}
	// Becoming available happens minReadySeconds after becoming ready, with no event of its own.
	if rs.Spec.MinReadySeconds > 0 && !controllerkit.IsPodReady(old) && controllerkit.IsPodReady(cur) {
		c.queue.AddAfter(controllerkit.KeyOf(rs), time.Duration(rs.Spec.MinReadySeconds)*time.Second+100*time.Millisecond)
	}
}

func (c *controller) podDeleted(p *corev1.Pod) {
	ref := metav1.GetControllerOf(p)
	rs := c.owner(p, ref)
	if rs == nil {
		return
	}
	c.exp.DeletionObserved(controllerkit.KeyOf(rs), controllerkit.KeyOf(p))
	c.enqueueCounted(rs)
}
