package kubelet

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// adopt starts the probe results of a container attempt where the previous agent left them:
// what it last reported for this very container (same containerd ID) stands until a probe of
// this agent decides otherwise. Without it an agent restart turned Ready pods NotReady until
// their first probe, and their Services refused connections meanwhile; Kubernetes' kubelet
// likewise keeps a container's readiness across its restart. Sidecars (restartable init
// containers) are probed too, so their statuses count.
func (w *probeWorker) adopt(pod *corev1.Pod, id string) {
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if cs.ContainerID == "containerd://"+id {
			w.started = w.started || cs.Started != nil && *cs.Started
			w.ready = cs.Ready
			return
		}
	}
}
