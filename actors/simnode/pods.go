package simnode

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// syncPod plays the kubelet for one pod: a pod being deleted is finished with grace 0, any
// other pod bound here is reported Running with every container started and ready.
func (f *fleet) syncPod(ctx context.Context, key string) error {
	ns, name := controllerkit.SplitKey(key)
	p, ok := f.pods.Get(ns, name)
	if !ok {
		return nil
	}
	if !f.ours(p.Spec.NodeName) || f.isFrozen(p.Spec.NodeName) {
		return nil
	}
	if p.DeletionTimestamp != nil {
		uid := p.UID
		err := f.client.Delete(ctx, controllerkit.MustKind("", "pods"), ns, name,
			&metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0)), Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || running(p) {
		return nil
	}
	// The cached pod's metadata and spec are only read: a shallow copy with a status of its own
	// is the pod to write, as a deep copy of everything would be.
	next := *p
	next.Status = *p.Status.DeepCopy()
	f.setRunning(&next)
	// PUT pods/status, the whole pod, as the kubelet writes it, in the trace of the pod's last
	// write (the binding) as the kubelet's is; the answer stays undecoded, as the pod cache gets
	// the written pod from the log anyway (decoding it was a third of this process's CPU per pod).
	err := f.client.PutStatus(f.pods.TraceContext(ctx, ns, name), &next)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// running: already reported Running and Ready with an IP; nothing to do.
func running(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && controllerkit.IsPodReady(p)
}

func (f *fleet) podIP(p *corev1.Pod) string {
	if p.Status.PodIP != "" {
		return p.Status.PodIP
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	i := f.index[p.Spec.NodeName]
	n := f.nextIP[p.Spec.NodeName]
	f.nextIP[p.Spec.NodeName] = n + 1
	// 10.(128+i/256).(i%256).x: a /24 per node, reused after 254 pods (simulated, never routed).
	return fmt.Sprintf("10.%d.%d.%d", 128+i/256, i%256, n%254+1)
}

func (f *fleet) setRunning(p *corev1.Pod) {
	now := metav1.Now()
	ip := f.podIP(p)
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = ip
	p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	p.Status.HostIP = f.hostIP(p.Spec.NodeName)
	p.Status.HostIPs = []corev1.HostIP{{IP: p.Status.HostIP}}
	if p.Status.StartTime == nil {
		p.Status.StartTime = &now
	}
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled} {
		setCondition(&p.Status, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "simulated://" + c.Image, ContainerID: "simulated://" + string(p.UID) + "/" + c.Name,
			Ready: true, Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}

func setCondition(st *corev1.PodStatus, c corev1.PodCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			if st.Conditions[i].Status != c.Status {
				st.Conditions[i] = c
			}
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}
