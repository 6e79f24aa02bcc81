package controllerkit

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/skiff-sh/skiff/actors/informer"
)

// What the workload controllers (ReplicaSet, DaemonSet, Job, StatefulSet) do alike.

// Workload is the start of a workload's sync: the object of key in inf's cache and its
// selector. ok is false when there is nothing to do: the object is gone (its expectations are
// forgotten) or its selector is invalid or empty (validation forbids both).
func Workload[T metav1.Object](inf *informer.Informer, exp *Expectations, key string, selector func(T) *metav1.LabelSelector) (obj T, sel labels.Selector, ok bool) {
	ns, name := SplitKey(key)
	o, found := inf.Get(ns, name)
	if !found {
		exp.Forget(key)
		return obj, nil, false
	}
	obj = o.(T)
	sel, err := metav1.LabelSelectorAsSelector(selector(obj))
	if err != nil || sel.Empty() {
		return obj, nil, false
	}
	return obj, sel, true
}

// PodChanged settles key's expectations for an add (old nil) or update of its pod p: a pod
// seen for the first time is a create seen, one that starts terminating a delete seen (a
// terminating pod no longer counts, as in kube-controller-manager).
func (e *Expectations) PodChanged(key string, old, p *corev1.Pod) {
	if old == nil {
		e.CreationObserved(key)
	}
	if p.DeletionTimestamp != nil && (old == nil || old.DeletionTimestamp == nil) {
		e.DeletionObserved(key, KeyOf(p))
	}
}
