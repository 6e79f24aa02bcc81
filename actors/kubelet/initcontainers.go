package kubelet

import (
	corev1 "k8s.io/api/core/v1"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/schemas/podspec"
)

// Init containers run one at a time, in order, each to a successful exit before the next
// starts; a sidecar (an init container with restartPolicy Always) is started in its place in
// that order, the next one starts once it is started (its startup probe passed), and it then
// runs for the pod's life. The app containers start once every init container is through.
//
// How far a pod got is read from containerd's records each sync, as Kubernetes' kubelet reads
// it from its container statuses: a finished init container's record stays until the pod goes,
// so an agent that restarts does not run it again.

// initRestartPolicy is how a failed ordinary init container is treated: retried (with back-off)
// unless the pod never restarts; one that succeeded never runs again.
func initRestartPolicy(pod *corev1.Pod) corev1.RestartPolicy {
	if pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
		return corev1.RestartPolicyNever
	}
	return corev1.RestartPolicyOnFailure
}

// initBlocker is the index of the first init container that holds back the ones after it and
// the app containers (len(InitContainers) once none does). Once any app container has run the
// pod is initialized for good, whatever its init containers' records say, as in Kubernetes.
func (k *kubelet) initBlocker(pod *corev1.Pod, attempts map[string][]kruntime.ContainerStatus) int {
	n := len(pod.Spec.InitContainers)
	for i := range pod.Spec.Containers {
		if len(attempts[pod.Spec.Containers[i].Name]) > 0 {
			return n
		}
	}
	for i := range pod.Spec.InitContainers {
		if !k.initThrough(&pod.Spec.InitContainers[i], latest(attempts[pod.Spec.InitContainers[i].Name])) {
			return i
		}
	}
	return n
}

// initThrough reports whether an init container's latest attempt lets the next one start: an
// ordinary one exited 0, a sidecar runs and its startup probe (if any) passed.
func (k *kubelet) initThrough(c *corev1.Container, l *kruntime.ContainerStatus) bool {
	switch {
	case l == nil:
		return false
	case podspec.IsSidecar(c):
		return l.State == kruntime.StateRunning && k.probes.result(l.ID, c).Started
	default:
		return l.State == kruntime.StateExited && l.ExitCode == 0
	}
}

// initFailed reports whether an ordinary init container failed for good (restartPolicy Never):
// the pod can never start its app containers.
func initFailed(pod *corev1.Pod, statuses []corev1.ContainerStatus) bool {
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		return false
	}
	for i, cs := range statuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && !podspec.IsSidecar(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	return false
}

// podContainers are the containers the sync may touch now, with the restart policy each
// follows: the init containers up to the blocking one (ordinary ones already through are
// left alone), then, once initialized, the app containers.
func podContainers(pod *corev1.Pod, blocker int) ([]*corev1.Container, []corev1.RestartPolicy) {
	var cs []*corev1.Container
	var policies []corev1.RestartPolicy
	for i := range pod.Spec.InitContainers[:min(blocker+1, len(pod.Spec.InitContainers))] {
		c := &pod.Spec.InitContainers[i]
		switch {
		case podspec.IsSidecar(c):
			cs, policies = append(cs, c), append(policies, corev1.RestartPolicyAlways)
		case i == blocker:
			cs, policies = append(cs, c), append(policies, initRestartPolicy(pod))
		}
	}
	if blocker < len(pod.Spec.InitContainers) {
		return cs, policies
	}
	for i := range pod.Spec.Containers {
		cs, policies = append(cs, &pod.Spec.Containers[i]), append(policies, pod.Spec.RestartPolicy)
	}
	return cs, policies
}

// initStatuses are the pod's initContainerStatuses. An ordinary init container is ready once
// it exited 0 (as Kubernetes reports it); one not made yet waits with PodInitializing, which
// kubectl reads to print Init:N/M.
func (k *kubelet) initStatuses(pod *corev1.Pod, attempts map[string][]kruntime.ContainerStatus, waiting map[string]waitInfo) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := k.containerStatus(c, attempts[c.Name], waitingFor(c.Name, waiting), "PodInitializing")
		if !podspec.IsSidecar(c) {
			t := cs.State.Terminated
			cs.Ready = t != nil && t.ExitCode == 0
		}
		out = append(out, cs)
	}
	return out
}

// incompleteInit names the init containers that are not through yet (the Initialized
// condition's message).
func (k *kubelet) incompleteInit(pod *corev1.Pod, attempts map[string][]kruntime.ContainerStatus) []string {
	var names []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if !k.initThrough(c, latest(attempts[c.Name])) {
			names = append(names, c.Name)
		}
	}
	return names
}

// waitingFor is the waiting reason the sync noted for a container (nil: none).
func waitingFor(name string, waiting map[string]waitInfo) *waitInfo {
	if w, ok := waiting[name]; ok {
		return &w
	}
	return nil
}
