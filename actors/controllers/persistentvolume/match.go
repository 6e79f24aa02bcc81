package persistentvolume

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/skiff-sh/skiff/actors/informer"
)

// ByClass indexes volumes by spec.storageClassName; the scheduler reads the same index of the
// shared volume cache (informer indexes are shared by name).
const ByClass = "class"

// IndexByClass adds the ByClass index to a volume cache.
func IndexByClass(volumes informer.Typed[*corev1.PersistentVolume]) {
	volumes.AddIndexer(ByClass, func(pv *corev1.PersistentVolume) []string { return []string{pv.Spec.StorageClassName} })
}

// Fits reports whether pv is an available volume the claim could be bound to, as kube's
// findMatchingVolume judges it: same class, not taken (or pre-bound to this claim), not being
// deleted, room enough, every access mode asked for, the same volume mode, the claim's
// selector. The node is the caller's (NodeFits).
func Fits(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) bool {
	if r := pv.Spec.ClaimRef; r != nil && (r.Namespace != pvc.Namespace || r.Name != pvc.Name || (r.UID != "" && r.UID != pvc.UID)) {
		return false
	}
	size, want := pv.Spec.Capacity[corev1.ResourceStorage], pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	switch {
	case pv.DeletionTimestamp != nil, pv.Spec.ClaimRef == nil && pv.Status.Phase != corev1.VolumeAvailable:
		return false
	case pv.Spec.StorageClassName != claimClass(pvc), size.Cmp(want) < 0:
		return false
	case !hasModes(pv.Spec.AccessModes, pvc.Spec.AccessModes), !sameMode(pv.Spec.VolumeMode, pvc.Spec.VolumeMode):
		return false
	}
	if pvc.Spec.Selector == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(pvc.Spec.Selector)
	return err == nil && sel.Matches(labels.Set(pv.Labels))
}

// NodeFits reports whether the volume's node affinity admits node (no affinity: any node).
func NodeFits(pv *corev1.PersistentVolume, node *corev1.Node) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return true
	}
	ok, err := nodeaffinity.NewLazyErrorNodeSelector(pv.Spec.NodeAffinity.Required).Match(node)
	return err == nil && ok
}

func hasModes(have, want []corev1.PersistentVolumeAccessMode) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

func sameMode(a, b *corev1.PersistentVolumeMode) bool {
	mode := func(m *corev1.PersistentVolumeMode) corev1.PersistentVolumeMode {
		if m == nil {
			return corev1.PersistentVolumeFilesystem
		}
		return *m
	}
	return mode(a) == mode(b)
}

func claimClass(pvc *corev1.PersistentVolumeClaim) string {
	if pvc.Spec.StorageClassName == nil {
		return ""
	}
	return *pvc.Spec.StorageClassName
}
