package kubelet

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/kubelet/downward"
	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/actors/kubelet/volumes"
)

// apiObjects reads volumes' ConfigMaps and Secrets through the API as the node.
type apiObjects struct{ k *kubelet }

func (a apiObjects) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	o, err := a.k.getObject(ctx, "configmaps", ns, name)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.ConfigMap), nil
}

func (a apiObjects) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	o, err := a.k.getObject(ctx, "secrets", ns, name)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.Secret), nil
}

func (a apiObjects) PersistentVolumeClaim(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	o, err := a.k.getObject(ctx, "persistentvolumeclaims", ns, name)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.PersistentVolumeClaim), nil
}

func (a apiObjects) PersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	o, err := a.k.getObject(ctx, "persistentvolumes", "", name)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.PersistentVolume), nil
}

// cleanLocalPath removes the directories of deleted local-path volumes whose claim no pod of
// this node names any more.
func (k *kubelet) cleanLocalPath(ctx context.Context) {
	inUse := func(ns, claim string) bool {
		for _, p := range k.ownPods() {
			for _, v := range p.Spec.Volumes {
				if p.Namespace == ns && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
					return true
				}
			}
		}
		return false
	}
	removed, err := k.volumes.CleanLocalPath(ctx, inUse)
	for _, dir := range removed {
		k.cfg.Logger.Info("kubelet: removed the data of a deleted local-path volume", "node", k.cfg.NodeName, "dir", dir)
	}
	if err != nil {
		k.cfg.Logger.Warn("kubelet: local-path cleanup", "node", k.cfg.NodeName, "err", err)
	}
}

// podSetup is what a sync prepared for the pod's containers: its sandbox and its volumes (or
// why they could not be set up).
type podSetup struct {
	sb      *kruntime.Sandbox
	vols    volumes.Volumes
	volsErr error
}

// setupVolumes makes the pod's volumes real (again; API data volumes are refreshed), with a
// FailedMount event when one cannot be.
func (k *kubelet) setupVolumes(ctx context.Context, pod *corev1.Pod, sb *kruntime.Sandbox) *podSetup {
	vols, err := k.volumes.Setup(ctx, pod, downward.Node{PodIP: sb.IP, HostIP: k.cfg.NodeIP, Allocatable: k.allocatable()})
	if err != nil {
		k.recorder.Eventf(ctx, pod, corev1.EventTypeWarning, "FailedMount", "%v", err)
	}
	return &podSetup{sb: sb, vols: vols, volsErr: err}
}

// evict ends a pod whose emptyDir outgrew its sizeLimit, as Kubernetes' eviction manager does:
// its containers are killed, and it is Failed with reason Evicted and the manager's message.
// The next sync, seeing it Failed, removes its sandbox.
func (k *kubelet) evict(ctx context.Context, pod *corev1.Pod, sb *kruntime.Sandbox, o volumes.Overuse) error {
	msg := o.Message()
	k.recorder.Eventf(ctx, pod, corev1.EventTypeWarning, "Evicted", "%s", msg)
	k.probes.retain(pod.UID, nil)
	cur, err := k.podRuntime(ctx, pod.UID)
	if err != nil {
		return err
	}
	if cur != nil {
		for _, c := range cur.Containers {
			if c.State == kruntime.StateRunning {
				if err := k.rt.KillContainer(ctx, c.ID, time.Second); err != nil {
					return err
				}
			}
		}
		if cur, err = k.podRuntime(ctx, pod.UID); err != nil {
			return err
		}
	}
	next := pod.DeepCopy()
	next.Status = k.podStatus(pod, sb, byName(cur), nil)
	next.Status.Phase, next.Status.Reason, next.Status.Message = corev1.PodFailed, "Evicted", msg
	now := mt(time.Now())
	setCondition(&next.Status, corev1.DisruptionTarget, corev1.ConditionTrue, "TerminationByKubelet", now)
	for i := range next.Status.Conditions {
		if c := &next.Status.Conditions[i]; c.Type == corev1.DisruptionTarget {
			c.Message = msg
		}
	}
	setCondition(&next.Status, corev1.PodReady, corev1.ConditionFalse, "PodFailed", now)
	setCondition(&next.Status, corev1.ContainersReady, corev1.ConditionFalse, "PodFailed", now)
	if _, err := k.client.UpdateStatus(ctx, next); err != nil {
		return err
	}
	k.enqueue(controllerkit.KeyOf(pod), false)
	return nil
}
