package defaults

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PersistentVolume defaults as Kubernetes does: reclaim policy Retain (a provisioned volume
// gets its class's instead), volume mode Filesystem, phase Pending, hostPath type "".
func PersistentVolume(pv *corev1.PersistentVolume) {
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if pv.Spec.VolumeMode == nil {
		fs := corev1.PersistentVolumeFilesystem
		pv.Spec.VolumeMode = &fs
	}
	if pv.Status.Phase == "" {
		pv.Status.Phase = corev1.VolumePending
	}
	if hp := pv.Spec.HostPath; hp != nil && hp.Type == nil {
		unset := corev1.HostPathUnset
		hp.Type = &unset
	}
}

// PersistentVolumeClaim defaults the volume mode to Filesystem and the phase to Pending.
func PersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) {
	if pvc.Spec.VolumeMode == nil {
		fs := corev1.PersistentVolumeFilesystem
		pvc.Spec.VolumeMode = &fs
	}
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
}

// StorageClass defaults the reclaim policy to Delete and the binding mode to Immediate.
func StorageClass(sc *storagev1.StorageClass) {
	if sc.ReclaimPolicy == nil {
		d := corev1.PersistentVolumeReclaimDelete
		sc.ReclaimPolicy = &d
	}
	if sc.VolumeBindingMode == nil {
		m := storagev1.VolumeBindingImmediate
		sc.VolumeBindingMode = &m
	}
}

// The built-in storage: every cluster has the default class LocalPathClass, whose volumes
// LocalPathProvisioner makes as directories on the node that first runs a pod of the claim.
const (
	LocalPathClass       = "local-path"
	LocalPathProvisioner = "skiff.io/local-path"
	// DefaultClassAnnotation marks the default StorageClass, as Kubernetes names it.
	DefaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"
	// SelectedNodeAnnotation is the scheduler's choice of node for a WaitForFirstConsumer claim.
	SelectedNodeAnnotation = "volume.kubernetes.io/selected-node"
	// PVCProtectionFinalizer keeps a claim while a pod may use it (kube's name).
	PVCProtectionFinalizer = "kubernetes.io/pvc-protection"
	// LocalPathDirAnnotation is a node's directory for local-path volumes, published by its
	// kubelet; a node without it offers none.
	LocalPathDirAnnotation = "skiff.io/local-path-dir"
)

// IsDefaultClass reports the default-class annotation ("true"), as Kubernetes reads it.
func IsDefaultClass(c *storagev1.StorageClass) bool {
	return c.Annotations[DefaultClassAnnotation] == "true"
}

// LocalPathStorageClass is the default class the control plane keeps: local directories,
// bound when a pod first uses the claim, deleted with the claim.
func LocalPathStorageClass() *storagev1.StorageClass {
	reclaim, mode := corev1.PersistentVolumeReclaimDelete, storagev1.VolumeBindingWaitForFirstConsumer
	return &storagev1.StorageClass{
		TypeMeta:    metav1.TypeMeta{APIVersion: storagev1.SchemeGroupVersion.String(), Kind: "StorageClass"},
		ObjectMeta:  metav1.ObjectMeta{Name: LocalPathClass, Annotations: map[string]string{DefaultClassAnnotation: "true"}},
		Provisioner: LocalPathProvisioner, ReclaimPolicy: &reclaim, VolumeBindingMode: &mode,
	}
}
