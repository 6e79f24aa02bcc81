package persistentvolume

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/schemas/defaults"
)

func (c *controller) sync(ctx context.Context, key string) error {
	if isClaimKey(key) {
		pvc, ok := c.claims.Get(controllerkit.SplitKey(key))
		if !ok || pvc.DeletionTimestamp != nil {
			return nil
		}
		if pvc.Spec.VolumeName == "" {
			return c.syncUnboundClaim(ctx, pvc)
		}
		return c.syncBoundClaim(ctx, pvc)
	}
	pv, ok := c.volumes.Get("", key)
	if !ok || pv.DeletionTimestamp != nil {
		return nil
	}
	return c.syncVolume(ctx, pv)
}

// syncUnboundClaim binds a pending claim to a volume that fits, or provisions one, or says
// (as an event) what it waits for.
func (c *controller) syncUnboundClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	class := claimClass(pvc)
	var sc *storagev1.StorageClass
	if class != "" {
		sc, _ = c.classes.Get("", class)
	}
	node := pvc.Annotations[defaults.SelectedNodeAnnotation]
	waitForConsumer := sc != nil && sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
	if waitForConsumer && node == "" {
		c.rec.Eventf(ctx, pvc, corev1.EventTypeNormal, "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
		return c.setClaimPhase(ctx, pvc, corev1.ClaimPending)
	}
	var n *corev1.Node
	if node != "" {
		n, _ = c.nodes.Get("", node)
	}
	// A volume for the selected node only: with that node gone, provisioning says so.
	if node == "" || n != nil {
		if pv := c.findVolume(pvc, n); pv != nil {
			return c.bind(ctx, pvc, pv)
		}
	}
	switch {
	case class == "":
		c.rec.Eventf(ctx, pvc, corev1.EventTypeNormal, "FailedBinding", "no persistent volumes available for this claim and no storage class is set")
	case sc == nil:
		c.rec.Eventf(ctx, pvc, corev1.EventTypeWarning, "ProvisioningFailed", "storageclass.storage.k8s.io %q not found", class)
	case sc.Provisioner == defaults.LocalPathProvisioner:
		return c.provision(ctx, pvc, sc, n, node)
	default:
		c.rec.Eventf(ctx, pvc, corev1.EventTypeNormal, "ExternalProvisioning",
			"Waiting for a volume to be created either by the external provisioner '%s' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.", sc.Provisioner)
	}
	return c.setClaimPhase(ctx, pvc, corev1.ClaimPending)
}

// findVolume is kube's findMatchingVolume: a volume pre-bound to the claim wins; otherwise
// the smallest one that Fits and (for a claim with a selected node) admits that node.
func (c *controller) findVolume(pvc *corev1.PersistentVolumeClaim, node *corev1.Node) *corev1.PersistentVolume {
	for _, pv := range c.volumes.ByIndex(byClaim, controllerkit.KeyOf(pvc)) {
		if r := pv.Spec.ClaimRef; pv.DeletionTimestamp == nil && (r.UID == "" || r.UID == pvc.UID) {
			return pv
		}
	}
	var best *corev1.PersistentVolume
	for _, pv := range c.volumes.ByIndex(ByClass, claimClass(pvc)) {
		if pv.Spec.ClaimRef != nil || !Fits(pv, pvc) || (node != nil && !NodeFits(pv, node)) {
			continue
		}
		if size := pv.Spec.Capacity[corev1.ResourceStorage]; best == nil || size.Cmp(best.Spec.Capacity[corev1.ResourceStorage]) < 0 {
			best = pv
		}
	}
	return best
}

// bind writes the binding in kube's order, each step a write the next sync resumes from:
// the volume's claimRef, the volume's phase, the claim's volumeName, the claim's status.
func (c *controller) bind(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) error {
	if r := pv.Spec.ClaimRef; r == nil || r.UID != pvc.UID {
		next := pv.DeepCopy()
		next.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name,
			UID: pvc.UID, ResourceVersion: pvc.ResourceVersion}
		if r == nil {
			setAnnotation(&next.ObjectMeta, AnnBoundByController, "yes")
		}
		o, err := c.cfg.Client.Update(ctx, next)
		if err != nil {
			return err
		}
		pv = o.(*corev1.PersistentVolume)
	}
	if err := c.setVolumePhase(ctx, pv, corev1.VolumeBound, ""); err != nil {
		return err
	}
	if pvc.Spec.VolumeName != pv.Name || pvc.Annotations[AnnBindCompleted] != "yes" {
		next := pvc.DeepCopy()
		next.Spec.VolumeName = pv.Name
		setAnnotation(&next.ObjectMeta, AnnBindCompleted, "yes")
		if pvc.Spec.VolumeName == "" { // the controller chose the volume, not the user
			setAnnotation(&next.ObjectMeta, AnnBoundByController, "yes")
		}
		o, err := c.cfg.Client.Update(ctx, next)
		if err != nil {
			return err
		}
		pvc = o.(*corev1.PersistentVolumeClaim)
	}
	return c.setClaimBound(ctx, pvc, pv)
}

// syncBoundClaim keeps a bound claim's status, finishes a binding half done, or marks the
// claim Lost when its volume is gone or bound elsewhere.
func (c *controller) syncBoundClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	pv, ok := c.volumes.Get("", pvc.Spec.VolumeName)
	if !ok {
		if _, err := c.cfg.Client.Get(ctx, controllerkit.MustKind("", "persistentvolumes"), "", pvc.Spec.VolumeName); !apierrors.IsNotFound(err) {
			return err // there after all (the cache lags), or the read failed: try again
		}
		if pvc.Status.Phase != corev1.ClaimLost {
			c.rec.Eventf(ctx, pvc, corev1.EventTypeWarning, "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
		}
		return c.setClaimPhase(ctx, pvc, corev1.ClaimLost)
	}
	switch r := pv.Spec.ClaimRef; {
	case r == nil, r.Namespace == pvc.Namespace && r.Name == pvc.Name && (r.UID == "" || r.UID == pvc.UID):
		return c.bind(ctx, pvc, pv)
	default:
		if pvc.Status.Phase != corev1.ClaimLost {
			c.rec.Eventf(ctx, pvc, corev1.EventTypeWarning, "ClaimMisbound", "Two claims are bound to the same volume, this one is bound incorrectly")
		}
		return c.setClaimPhase(ctx, pvc, corev1.ClaimLost)
	}
}

func (c *controller) setClaimPhase(ctx context.Context, pvc *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase) error {
	if pvc.Status.Phase == phase {
		return nil
	}
	next := pvc.DeepCopy()
	next.Status.Phase = phase
	_, err := c.cfg.Client.UpdateStatus(ctx, next)
	return err
}

// setClaimBound: phase Bound with the volume's access modes and capacity, as kube reports them.
func (c *controller) setClaimBound(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) error {
	s := &pvc.Status
	size, have := pv.Spec.Capacity[corev1.ResourceStorage], s.Capacity[corev1.ResourceStorage]
	if s.Phase == corev1.ClaimBound && hasModes(s.AccessModes, pv.Spec.AccessModes) && len(s.AccessModes) == len(pv.Spec.AccessModes) && size.Cmp(have) == 0 {
		return nil
	}
	next := pvc.DeepCopy()
	next.Status.Phase, next.Status.AccessModes = corev1.ClaimBound, pv.Spec.AccessModes
	next.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
	_, err := c.cfg.Client.UpdateStatus(ctx, next)
	return err
}

func setAnnotation(m *metav1.ObjectMeta, k, v string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[k] = v
}
