package persistentvolume

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/schemas/defaults"
)

// syncVolume keeps a volume's phase and reclaims it once its claim is gone.
func (c *controller) syncVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	r := pv.Spec.ClaimRef
	if r == nil {
		return c.setVolumePhase(ctx, pv, corev1.VolumeAvailable, "")
	}
	pvc, err := c.claimOf(ctx, r)
	if err != nil {
		return err
	}
	switch {
	case pvc == nil:
		return c.reclaim(ctx, pv)
	case pvc.Spec.VolumeName == pv.Name:
		return c.setVolumePhase(ctx, pv, corev1.VolumeBound, "")
	case pvc.Spec.VolumeName == "":
		c.queue.Add(controllerkit.KeyOf(pvc)) // the claim's sync finishes (or starts) the binding
		return nil
	case pv.Annotations[AnnBoundByController] == "yes":
		// The claim went to another volume: this one is free again (kube's unbind).
		next := pv.DeepCopy()
		next.Spec.ClaimRef = nil
		delete(next.Annotations, AnnBoundByController)
		_, err := c.cfg.Client.Update(ctx, next)
		return err
	}
	return nil // pre-bound by a user to a claim bound elsewhere: left as the user made it
}

// claimOf is the claim a volume's claimRef names, nil when it is gone (or was replaced by
// another of the same name). Before a volume is released the absence is confirmed with the
// apiserver, as kube does, since the cache may not have seen a new claim yet.
func (c *controller) claimOf(ctx context.Context, r *corev1.ObjectReference) (*corev1.PersistentVolumeClaim, error) {
	pvc, ok := c.claims.Get(r.Namespace, r.Name)
	if !ok {
		o, err := c.cfg.Client.Get(ctx, controllerkit.MustKind("", "persistentvolumeclaims"), r.Namespace, r.Name)
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, err
		}
		pvc = o.(*corev1.PersistentVolumeClaim)
	}
	if r.UID != "" && pvc.UID != r.UID {
		return nil, nil
	}
	return pvc, nil
}

// reclaim applies the reclaim policy to a volume whose claim is gone: Released, and with
// Delete a volume of the local-path provisioner is deleted (its node removes the data); a
// Delete volume nothing here can delete is Failed, as kube reports it.
func (c *controller) reclaim(ctx context.Context, pv *corev1.PersistentVolume) error {
	if pv.Status.Phase == corev1.VolumeFailed {
		return nil
	}
	if err := c.setVolumePhase(ctx, pv, corev1.VolumeReleased, ""); err != nil {
		return err
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		return nil
	}
	if pv.Annotations[AnnProvisionedBy] != defaults.LocalPathProvisioner {
		msg := fmt.Sprintf("error getting deleter volume plugin for volume %q: no deletable volume plugin matched", pv.Name)
		c.rec.Eventf(ctx, pv, corev1.EventTypeWarning, "VolumeFailedDelete", "%s", msg)
		return c.setVolumePhase(ctx, pv, corev1.VolumeFailed, msg)
	}
	uid := pv.UID
	err := c.cfg.Client.Delete(ctx, controllerkit.MustKind("", "persistentvolumes"), "", pv.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// setVolumePhase writes the phase (and message, and the transition's time) when it changed.
func (c *controller) setVolumePhase(ctx context.Context, pv *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, msg string) error {
	if pv.Status.Phase == phase && pv.Status.Message == msg {
		return nil
	}
	next := pv.DeepCopy()
	next.Status.Phase, next.Status.Message = phase, msg
	now := metav1.Now()
	next.Status.LastPhaseTransitionTime = &now
	_, err := c.cfg.Client.UpdateStatus(ctx, next)
	return err
}
