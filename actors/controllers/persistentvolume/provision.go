package persistentvolume

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/schemas/defaults"
)

// provision creates the local-path volume of a claim on its selected node: a hostPath
// (DirectoryOrCreate) under the directory the node's kubelet published, with node affinity
// for that node, pre-bound to the claim, and the class's reclaim policy. The volume is named
// after the claim's UID, so a retry after a lost reply finds the one it made.
func (c *controller) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass, n *corev1.Node, node string) error {
	fail := func(format string, args ...any) error {
		c.rec.Eventf(ctx, pvc, corev1.EventTypeWarning, "ProvisioningFailed", format, args...)
		return c.setClaimPhase(ctx, pvc, corev1.ClaimPending)
	}
	switch {
	case node == "":
		return fail("%s volumes live on one node: the claim needs one, so use a class with volumeBindingMode WaitForFirstConsumer", defaults.LocalPathProvisioner)
	case pvc.Spec.Selector != nil:
		return fail("claim Selector is not supported")
	case n == nil:
		return fail("selected node %q not found", node)
	case n.Annotations[defaults.LocalPathDirAnnotation] == "":
		return fail("node %q offers no %s volumes (its agent has not published %s)", node, defaults.LocalPathProvisioner, defaults.LocalPathDirAnnotation)
	}
	hostname := n.Labels[corev1.LabelHostname]
	if hostname == "" {
		hostname = n.Name
	}
	name := "pvc-" + string(pvc.UID)
	reclaim := corev1.PersistentVolumeReclaimDelete
	if sc.ReclaimPolicy != nil {
		reclaim = *sc.ReclaimPolicy
	}
	dirType, fs := corev1.HostPathDirectoryOrCreate, corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			AnnProvisionedBy: defaults.LocalPathProvisioner, AnnBoundByController: "yes"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes: pvc.Spec.AccessModes, PersistentVolumeReclaimPolicy: reclaim, StorageClassName: sc.Name, VolumeMode: &fs,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: filepath.Join(n.Annotations[defaults.LocalPathDirAnnotation], fmt.Sprintf("%s_%s_%s", name, pvc.Namespace, pvc.Name)), Type: &dirType}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{hostname}}},
			}}}},
		},
	}
	_, err := c.cfg.Client.Create(ctx, pv)
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil // made by an earlier try; its informer event brings it to the claim
	case err != nil:
		c.rec.Eventf(ctx, pvc, corev1.EventTypeWarning, "ProvisioningFailed", "failed to provision volume with StorageClass %q: %v", sc.Name, err)
		return err
	}
	c.rec.Eventf(ctx, pvc, corev1.EventTypeNormal, "ProvisioningSucceeded", "Successfully provisioned volume %s", name)
	return nil
}
