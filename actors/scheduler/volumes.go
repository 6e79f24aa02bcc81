package scheduler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/skiff-sh/skiff/actors/controllers/persistentvolume"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/actors/scheduler/framework"
	"github.com/skiff-sh/skiff/schemas/defaults"
)

// volumeState is the scheduler's view of claims, volumes and classes (the VolumeBinding
// plugin's input): the shared informers, read per cycle by the pod's claim names.
type volumeState struct {
	claims  informer.Typed[*corev1.PersistentVolumeClaim]
	volumes informer.Typed[*corev1.PersistentVolume]
	classes informer.Typed[*storagev1.StorageClass]
}

func newVolumeState(f *informer.Factory) *volumeState {
	v := &volumeState{
		claims:  informer.Shared[*corev1.PersistentVolumeClaim](f, "", "persistentvolumeclaims"),
		volumes: informer.Shared[*corev1.PersistentVolume](f, "", "persistentvolumes"),
		classes: informer.Shared[*storagev1.StorageClass](f, storagev1.GroupName, "storageclasses"),
	}
	persistentvolume.IndexByClass(v.volumes)
	return v
}

// podVolumes is the framework.VolumeLister: what the pod's claims ask of a node, in
// kube-scheduler's words when nothing can satisfy them.
func (v *volumeState) podVolumes(pod *corev1.Pod) framework.PodVolumes {
	var out framework.PodVolumes
	for _, vol := range pod.Spec.Volumes {
		if vol.PersistentVolumeClaim == nil {
			continue
		}
		name := vol.PersistentVolumeClaim.ClaimName
		pvc, ok := v.claims.Get(pod.Namespace, name)
		switch {
		case !ok:
			return framework.PodVolumes{Unschedulable: fmt.Sprintf("persistentvolumeclaim %q not found", name)}
		case pvc.DeletionTimestamp != nil:
			return framework.PodVolumes{Unschedulable: fmt.Sprintf("persistentvolumeclaim %q is being deleted", name)}
		case pvc.Spec.VolumeName != "":
			pv, ok := v.volumes.Get("", pvc.Spec.VolumeName)
			if !ok {
				return framework.PodVolumes{Unschedulable: "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"}
			}
			if pv.Spec.NodeAffinity != nil && pv.Spec.NodeAffinity.Required != nil {
				out.Affinities = append(out.Affinities, pv.Spec.NodeAffinity.Required)
			}
			continue
		}
		sc := v.delayedClass(pvc)
		if sc == nil {
			return framework.PodVolumes{Unschedulable: framework.ReasonUnboundImmediate}
		}
		if node := pvc.Annotations[defaults.SelectedNodeAnnotation]; node != "" {
			out.SelectedNode = node
			continue // its volume is bound or made for that node
		}
		out.Unbound = append(out.Unbound, v.unbound(pvc, sc))
	}
	return out
}

// unbound is how nodes can serve a claim waiting for its first consumer: the available
// volumes that fit it, and what its class can provision (local-path: on the nodes that publish
// a directory; no-provisioner: nothing; any other: kube-scheduler assumes anywhere).
func (v *volumeState) unbound(pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass) framework.UnboundClaim {
	var u framework.UnboundClaim
	switch sc.Provisioner {
	case defaults.LocalPathProvisioner:
		u.ProvisionAnnotation = defaults.LocalPathDirAnnotation
	case noProvisioner:
	default:
		u.Anywhere = true
	}
	for _, pv := range v.volumes.ByIndex(persistentvolume.ByClass, sc.Name) {
		if persistentvolume.Fits(pv, pvc) {
			var sel *corev1.NodeSelector
			if pv.Spec.NodeAffinity != nil {
				sel = pv.Spec.NodeAffinity.Required
			}
			u.Volumes = append(u.Volumes, sel)
		}
	}
	return u
}

// unboundClaims are the keys of the pod's claims that are not bound yet.
func (v *volumeState) unboundClaims(pod *corev1.Pod) []string {
	var out []string
	for _, vol := range pod.Spec.Volumes {
		if c := vol.PersistentVolumeClaim; c != nil && !v.claimBound(pod.Namespace, c.ClaimName) {
			out = append(out, pod.Namespace+"/"+c.ClaimName)
		}
	}
	return out
}

func (v *volumeState) claimsBound(pod *corev1.Pod) bool { return len(v.unboundClaims(pod)) == 0 }

// claimBound: the binder has finished with the claim, as the kubelet checks before mounting it
// (the claim Bound to a volume whose claimRef is that claim).
func (v *volumeState) claimBound(ns, name string) bool {
	pvc, ok := v.claims.Get(ns, name)
	if !ok || pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return false
	}
	pv, ok := v.volumes.Get("", pvc.Spec.VolumeName)
	return ok && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == pvc.UID
}

// noProvisioner is the provisioner of classes whose volumes are made by hand (kube's name).
const noProvisioner = "kubernetes.io/no-provisioner"

// delayedClass is the claim's class when it binds on its first consumer, else nil.
func (v *volumeState) delayedClass(pvc *corev1.PersistentVolumeClaim) *storagev1.StorageClass {
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return nil
	}
	sc, ok := v.classes.Get("", *pvc.Spec.StorageClassName)
	if !ok || sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		return nil
	}
	return sc
}

// selectNode records node on each of the pod's unbound WaitForFirstConsumer claims
// (volume.kubernetes.io/selected-node, as kube-scheduler's PreBind does), so their volumes
// are made for it. The pod is bound once the binder has bound them (awaitClaims).
func (a *schedulerActor) selectNode(ctx context.Context, pod *corev1.Pod, node string) error {
	v := a.st.vols
	for _, vol := range pod.Spec.Volumes {
		if vol.PersistentVolumeClaim == nil {
			continue
		}
		pvc, ok := v.claims.Get(pod.Namespace, vol.PersistentVolumeClaim.ClaimName)
		if !ok || pvc.Spec.VolumeName != "" || pvc.Annotations[defaults.SelectedNodeAnnotation] == node || v.delayedClass(pvc) == nil {
			continue
		}
		next := pvc.DeepCopy()
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[defaults.SelectedNodeAnnotation] = node
		if _, err := a.st.cfg.Client.Update(ctx, next); err != nil {
			return fmt.Errorf("selecting node %s for claim %s: %w", node, pvc.Name, err)
		}
	}
	return nil
}

// onVolumeObject turns a claim or volume change into a cluster event for the pods that
// VolumeBinding rejected; a deletion helps none.
func (a *schedulerActor) onVolumeObject(t informer.EventType) {
	action := framework.Update
	switch t {
	case informer.Added:
		action = framework.Add
	case informer.Deleted:
		return
	}
	a.queue.OnEvent(&framework.ClusterEvent{Resource: framework.ResourceVolume, Action: action})
}
