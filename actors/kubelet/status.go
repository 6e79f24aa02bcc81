package kubelet

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/schemas/podspec"
)

// podStatus derives the pod's status from the runtime's view, keeping the fields the agent
// does not own (qosClass, conditions of others) and every unchanged transition time.
func (k *kubelet) podStatus(pod *corev1.Pod, sb *kruntime.Sandbox, attempts map[string][]kruntime.ContainerStatus, waiting map[string]waitInfo) corev1.PodStatus {
	st := *pod.Status.DeepCopy()
	now := time.Now()
	if k.cfg.NodeIP != "" { // a node without one reports none (an empty host IP is invalid)
		st.HostIP = k.cfg.NodeIP
		st.HostIPs = []corev1.HostIP{{IP: k.cfg.NodeIP}}
	}
	if sb != nil {
		st.PodIP = sb.IP
		st.PodIPs = []corev1.PodIP{{IP: sb.IP}}
	}
	if st.StartTime == nil {
		t := now
		if sb != nil && !sb.CreatedAt.IsZero() {
			t = sb.CreatedAt
		}
		st.StartTime = ptr.To(mt(t))
	}
	blocker := k.initBlocker(pod, attempts)
	initialized := blocker == len(pod.Spec.InitContainers)
	notMade := "ContainerCreating"
	if !initialized {
		notMade = "PodInitializing"
	}
	st.InitContainerStatuses = k.initStatuses(pod, attempts, waiting)
	st.ContainerStatuses = nil
	allReady := initialized
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := k.containerStatus(c, attempts[c.Name], waitingFor(c.Name, waiting), notMade)
		allReady = allReady && cs.Ready
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	for i, cs := range st.InitContainerStatuses {
		if podspec.IsSidecar(&pod.Spec.InitContainers[i]) {
			allReady = allReady && cs.Ready // sidecars count toward readiness
		}
	}
	switch {
	case initFailed(pod, st.InitContainerStatuses):
		st.Phase = corev1.PodFailed
	case !initialized:
		st.Phase = corev1.PodPending
	default:
		st.Phase = podPhase(pod.Spec.RestartPolicy, st.ContainerStatuses)
	}
	if st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed {
		allReady = false
	}
	ready := corev1.ConditionFalse
	if allReady {
		ready = corev1.ConditionTrue
	}
	sandbox := corev1.ConditionFalse
	if sb != nil {
		sandbox = corev1.ConditionTrue
	}
	t := mt(now)
	setCondition(&st, corev1.PodScheduled, corev1.ConditionTrue, "", t)
	setCondition(&st, corev1.PodReadyToStartContainers, sandbox, "", t)
	if initialized {
		setConditionMessage(&st, corev1.PodInitialized, corev1.ConditionTrue, "", "", t)
	} else {
		setConditionMessage(&st, corev1.PodInitialized, corev1.ConditionFalse, "ContainersNotInitialized",
			fmt.Sprintf("containers with incomplete status: %v", k.incompleteInit(pod, attempts)), t)
	}
	reason := ""
	if !allReady {
		reason = "ContainersNotReady"
	}
	setCondition(&st, corev1.ContainersReady, ready, reason, t)
	setCondition(&st, corev1.PodReady, ready, reason, t)
	return st
}

// containerStatus is one container's status from its attempts; one never made waits with the
// reason the sync gave, else notMade.
func (k *kubelet) containerStatus(c *corev1.Container, atts []kruntime.ContainerStatus, w *waitInfo, notMade string) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: ptr.To(false)}
	l := latest(atts)
	if l == nil {
		wi := waitInfo{reason: notMade}
		if w != nil {
			wi = *w
		}
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: wi.reason, Message: wi.message}
		return cs
	}
	cs.RestartCount = int32(l.Attempt)
	cs.ImageID = l.Image
	cs.ContainerID = "containerd://" + l.ID
	if len(atts) > 1 {
		prev := atts[len(atts)-2]
		cs.LastTerminationState.Terminated = terminated(&prev)
	}
	switch l.State {
	case kruntime.StateRunning:
		res := k.probes.result(l.ID, c)
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: mt(l.StartedAt)}
		cs.Ready, cs.Started = res.Ready, ptr.To(res.Started)
	case kruntime.StateExited:
		if w != nil {
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: w.reason, Message: w.message}
			cs.LastTerminationState.Terminated = terminated(l)
		} else {
			cs.State.Terminated = terminated(l)
		}
	default:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	}
	return cs
}

func terminated(c *kruntime.ContainerStatus) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{
		ExitCode: int32(c.ExitCode), Reason: c.Reason, StartedAt: mt(c.StartedAt), FinishedAt: mt(c.FinishedAt),
		Message:     terminationMessage(c),
		ContainerID: "containerd://" + c.ID,
	}
}

// podPhase follows the kubelet: Pending while a container has never started, Succeeded or
// Failed once every container is finished for good, Running otherwise.
func podPhase(policy corev1.RestartPolicy, statuses []corev1.ContainerStatus) corev1.PodPhase {
	var waiting, running, succeeded, failed int
	for _, cs := range statuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			} else {
				failed++
			}
		case cs.LastTerminationState.Terminated != nil:
			running++ // restarting (back-off): still a running pod
		default:
			waiting++
		}
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case failed > 0 && policy == corev1.RestartPolicyNever:
		return corev1.PodFailed
	case failed == 0 && succeeded > 0 && policy != corev1.RestartPolicyAlways:
		return corev1.PodSucceeded
	default:
		// Exited containers that are about to be restarted.
		return corev1.PodRunning
	}
}

func setCondition(st *corev1.PodStatus, t corev1.PodConditionType, s corev1.ConditionStatus, reason string, now metav1.Time) {
	setConditionMessage(st, t, s, reason, "", now)
}

func setConditionMessage(st *corev1.PodStatus, t corev1.PodConditionType, s corev1.ConditionStatus, reason, msg string, now metav1.Time) {
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != s {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message = s, reason, msg
		return
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: now})
}

// mt is a metav1.Time as the API stores it (whole seconds, UTC), so a status computed again
// compares equal to the one read back.
func mt(t time.Time) metav1.Time {
	if t.IsZero() {
		return metav1.Time{}
	}
	return metav1.NewTime(t.UTC().Truncate(time.Second))
}
