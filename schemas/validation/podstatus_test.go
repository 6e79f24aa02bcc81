package validation_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/schemas/validation"
)

// A pods/status write is checked as kube-apiserver checks one: what the status may hold, and
// that the spec and metadata stayed as they were.
func TestPodStatusUpdates(t *testing.T) {
	pod := func(policy corev1.RestartPolicy) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: meta("p"), Spec: podSpec()}
		p.Spec.NodeName, p.Spec.RestartPolicy = "n1", policy
		p.Spec.InitContainers = []corev1.Container{
			{Name: "setup", Image: "busybox"},
			{Name: "sidecar", Image: "busybox", RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways)},
		}
		return p
	}
	running := func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP, p.Status.PodIPs = "10.0.0.9", []corev1.PodIP{{IP: "10.0.0.9"}}
		p.Status.HostIP, p.Status.HostIPs = "192.0.2.1", []corev1.HostIP{{IP: "192.0.2.1"}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	}
	status := func(name string, old *corev1.Pod, change func(*corev1.Pod), path, want string) {
		t.Helper()
		checkUpdate(t, validation.ValidateStatusUpdate, name, old, change, path, want)
	}
	// Changes of a running pod's status.
	for _, c := range []struct {
		name       string
		change     func(*corev1.PodStatus)
		path, want string
	}{
		{"running", func(*corev1.PodStatus) {}, "", ""},
		{"dual-stack pod IPs", func(s *corev1.PodStatus) { s.PodIPs = append(s.PodIPs, corev1.PodIP{IP: "fd00::9"}) }, "", ""},
		{"pod IP", func(s *corev1.PodStatus) { s.PodIPs[0].IP = "10.0.0.300" }, "status.podIPs[0].ip", "must be a valid IP address"},
		{"two IPv4 pod IPs", func(s *corev1.PodStatus) { s.PodIPs = append(s.PodIPs, corev1.PodIP{IP: "10.0.0.10"}) },
			"status.podIPs", "no more than one IP for each IP family"},
		{"host IP and host IPs", func(s *corev1.PodStatus) { s.HostIPs[0].IP = "192.0.2.2" }, "status.hostIPs[0].ip", "must be equal to `hostIP`"},
		{"readiness gate condition", func(s *corev1.PodStatus) {
			s.Conditions = []corev1.PodCondition{{Type: "example.com/gate", Status: corev1.ConditionTrue}}
		}, "", ""},
		{"condition type", func(s *corev1.PodStatus) {
			s.Conditions = []corev1.PodCondition{{Type: "not a type!", Status: corev1.ConditionTrue}}
		}, "status.conditions[0].type", "name part must consist of"},
	} {
		status(c.name, pod(corev1.RestartPolicyAlways), func(p *corev1.Pod) { running(p); c.change(&p.Status) }, c.path, c.want)
	}
	status("nominated node", pod(corev1.RestartPolicyAlways), func(p *corev1.Pod) {
		p.Status.NominatedNodeName = "Not_A_Node"
	}, "status.nominatedNodeName", "RFC 1123")
	status("spec through status", pod(corev1.RestartPolicyAlways), func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports[0].ContainerPort = 81
	}, "spec", "pod updates may not change fields")

	terminated := func(code int32) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}
	}
	restarted := func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		p.Status.InitContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	}
	ended := func(policy corev1.RestartPolicy, code int32) *corev1.Pod {
		p := pod(policy)
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", State: terminated(code)}}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "sidecar", State: terminated(code)}}
		return p
	}
	status("restart under Always", ended(corev1.RestartPolicyAlways, 0), restarted, "", "")
	status("restart of a failure under OnFailure", ended(corev1.RestartPolicyOnFailure, 1), restarted, "", "")
	status("restart of a success under OnFailure", ended(corev1.RestartPolicyOnFailure, 0), restarted,
		"status.containerStatuses[0].state", "may not be transitioned to non-terminated state")
	status("restart under Never", ended(corev1.RestartPolicyNever, 1), restarted,
		"status.containerStatuses[0].state", "may not be transitioned to non-terminated state")
	// The restartable init container (a sidecar) may restart under Never: only web is refused.
	status("sidecar restart under Never", ended(corev1.RestartPolicyNever, 1), func(p *corev1.Pod) {
		p.Status.InitContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	}, "", "")
}
