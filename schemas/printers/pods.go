package printers

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/schemas/podspec"
)

func init() {
	register("pods", printer{
		columns: []metav1.TableColumnDefinition{nameColumn,
			col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
			col("Status", "string", "The aggregate status of the containers in this pod."),
			col("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
			ageColumn,
			wide("IP", "string", "The IP address assigned to the pod."),
			wide("Node", "string", "The node the pod is assigned to."),
			wide("Nominated Node", "string", "The node the scheduler nominated for the pod."),
			wide("Readiness Gates", "string", "The readiness gates of the pod."),
		},
		cells: typed(podCells),
	})
}

// nodeLost is the status reason the node lifecycle controller gives Pods of a lost node.
const nodeLost = "NodeLost"

func podCells(p *corev1.Pod, now time.Time) []any {
	ready, total := podReady(p)
	restarts, lastRestart := podRestarts(p)
	restartCell := fmt.Sprint(restarts)
	if !lastRestart.IsZero() {
		restartCell = fmt.Sprintf("%d (%s ago)", restarts, Age(lastRestart, now))
	}
	return []any{p.Name, fmt.Sprintf("%d/%d", ready, total), PodStatus(p), restartCell, Age(p.CreationTimestamp, now),
		orNone(p.Status.PodIP), orNone(p.Spec.NodeName), orNone(p.Status.NominatedNodeName), readinessGates(p)}
}

// podReady counts ready main and sidecar containers against their total.
func podReady(p *corev1.Pod) (ready, total int) {
	total = len(p.Spec.Containers)
	sidecars := map[string]bool{}
	for i := range p.Spec.InitContainers {
		if podspec.IsSidecar(&p.Spec.InitContainers[i]) {
			total++
			sidecars[p.Spec.InitContainers[i].Name] = true
		}
	}
	for _, s := range p.Status.InitContainerStatuses {
		if sidecars[s.Name] && s.Ready {
			ready++
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Ready {
			ready++
		}
	}
	return ready, total
}

// podRestarts sums restarts and finds the latest time a container restarted.
func podRestarts(p *corev1.Pod) (int32, metav1.Time) {
	var n int32
	var last metav1.Time
	add := func(s corev1.ContainerStatus) {
		n += s.RestartCount
		if t := s.LastTerminationState.Terminated; s.RestartCount > 0 && t != nil && last.Before(&t.FinishedAt) {
			last = t.FinishedAt
		}
	}
	for _, s := range p.Status.InitContainerStatuses {
		add(s)
	}
	for _, s := range p.Status.ContainerStatuses {
		add(s)
	}
	return n, last
}

// PodStatus is the STATUS column: the phase unless an init step, a waiting or terminated
// container, or deletion tells more.
func PodStatus(p *corev1.Pod) string {
	reason := string(p.Status.Phase)
	if p.Status.Reason != "" {
		reason = p.Status.Reason
	}
	if len(p.Spec.SchedulingGates) > 0 && p.Spec.NodeName == "" && p.Status.Phase == corev1.PodPending {
		reason = "SchedulingGated"
	}
	initReason, initializing := initStatus(p)
	if initializing {
		reason = initReason
	} else {
		hasRunning := false
		for i := len(p.Status.ContainerStatuses) - 1; i >= 0; i-- {
			s := p.Status.ContainerStatuses[i]
			switch {
			case s.State.Waiting != nil && s.State.Waiting.Reason != "":
				reason = s.State.Waiting.Reason
			case s.State.Terminated != nil:
				reason = terminatedReason(s.State.Terminated)
			case s.Ready && s.State.Running != nil:
				hasRunning = true
			}
		}
		if reason == "Completed" && hasRunning {
			reason = "NotReady"
			if podConditionTrue(p, corev1.PodReady) {
				reason = "Running"
			}
		}
	}
	if p.DeletionTimestamp != nil {
		if p.Status.Reason == nodeLost {
			return "Unknown"
		}
		return "Terminating"
	}
	return reason
}

// initStatus reports "Init:..." while init containers have not all finished.
func initStatus(p *corev1.Pod) (string, bool) {
	n := len(p.Spec.InitContainers)
	sidecars := map[string]bool{}
	for i := range p.Spec.InitContainers {
		sidecars[p.Spec.InitContainers[i].Name] = podspec.IsSidecar(&p.Spec.InitContainers[i])
	}
	for i, s := range p.Status.InitContainerStatuses {
		switch {
		case s.State.Terminated != nil && s.State.Terminated.ExitCode == 0:
			continue
		case sidecars[s.Name] && s.Started != nil && *s.Started:
			continue
		case s.State.Terminated != nil:
			return "Init:" + terminatedReason(s.State.Terminated), true
		case s.State.Waiting != nil && s.State.Waiting.Reason != "" && s.State.Waiting.Reason != "PodInitializing":
			return "Init:" + s.State.Waiting.Reason, true
		default:
			return fmt.Sprintf("Init:%d/%d", i, n), true
		}
	}
	return "", false
}

func terminatedReason(t *corev1.ContainerStateTerminated) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Signal != 0:
		return fmt.Sprintf("Signal:%d", t.Signal)
	}
	return fmt.Sprintf("ExitCode:%d", t.ExitCode)
}

func podConditionTrue(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readinessGates renders "1/2" (gates whose condition is True), "<none>" without gates.
func readinessGates(p *corev1.Pod) string {
	if len(p.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	ok := 0
	for _, g := range p.Spec.ReadinessGates {
		if podConditionTrue(p, g.ConditionType) {
			ok++
		}
	}
	return fmt.Sprintf("%d/%d", ok, len(p.Spec.ReadinessGates))
}

// containersAndImages renders the CONTAINERS and IMAGES columns of workloads.
func containersAndImages(cs []corev1.Container) (string, string) {
	names := make([]string, len(cs))
	images := make([]string, len(cs))
	for i, c := range cs {
		names[i], images[i] = c.Name, c.Image
	}
	return strings.Join(names, ","), strings.Join(images, ",")
}
