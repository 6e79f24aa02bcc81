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

func (c *controller) podAdded(p *corev1.Pod) {
	if p.DeletionTimestamp != nil {
		// Seen for the first time already terminating (e.g. after a relist): a deletion.
		c.podDeleted(p)
		return
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		if rs := c.owner(p, ref); rs != nil {
			c.exp.CreationObserved(controllerkit.KeyOf(rs))
			c.enqueueRS(rs)
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
	c.enqueueRS(rs)
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
	key := controllerkit.KeyOf(rs)
	c.exp.DeletionObserved(key, controllerkit.KeyOf(p))
	c.enqueueRS(rs)
}
