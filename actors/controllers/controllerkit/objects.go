package controllerkit

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/schemas"
)

// Key is the work-queue key of a namespaced object ("ns/name"; "name" when cluster-scoped).
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// KeyOf is Key for an object.
func KeyOf(obj metav1.Object) string { return Key(obj.GetNamespace(), obj.GetName()) }

// SplitKey undoes Key.
func SplitKey(key string) (namespace, name string) {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

// MustKind looks a served kind up by resource; it panics on a typo (a programming error).
func MustKind(group, resource string) *schemas.Kind { return informer.MustKind(group, resource) }

// Meta returns obj's metadata (every stored kind has it).
func Meta(obj runtime.Object) metav1.Object {
	m, _ := obj.(metav1.Object)
	return m
}

// IsOwnedBy reports whether obj's controller reference points at owner (by UID).
func IsOwnedBy(obj, owner metav1.Object) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == owner.GetUID()
}

// PodReadyCondition returns the pod's Ready condition, or nil.
func PodReadyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// IsPodReady: the Ready condition is True.
func IsPodReady(p *corev1.Pod) bool {
	c := PodReadyCondition(p)
	return c != nil && c.Status == corev1.ConditionTrue
}

// IsNodeReady: the node's Ready condition is True.
func IsNodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// IsPodAvailable: ready for at least minReadySeconds at now.
func IsPodAvailable(p *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	c := PodReadyCondition(p)
	if c == nil || c.Status != corev1.ConditionTrue {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	return !c.LastTransitionTime.IsZero() && c.LastTransitionTime.Add(time.Duration(minReadySeconds)*time.Second).Before(now)
}

// IsPodActive: neither finished nor being deleted; what counts towards a replica count.
func IsPodActive(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil
}

// Pods converts informer results.
func Pods(objs []runtime.Object) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*corev1.Pod))
	}
	return out
}
