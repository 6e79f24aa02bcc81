package statefulset

import (
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// The labels a StatefulSet's pods carry: their own name (a Service can select one pod), their
// ordinal, and the ControllerRevision they were made from.
const (
	PodNameLabel  = appsv1.StatefulSetPodNameLabel // statefulset.kubernetes.io/pod-name
	PodIndexLabel = appsv1.PodIndexLabel           // apps.kubernetes.io/pod-index
	RevisionLabel = appsv1.ControllerRevisionHashLabelKey
)

// ordinalOf parses "<set>-<ordinal>"; -1 for a pod that is not a member of set by name.
func ordinalOf(s *appsv1.StatefulSet, p *corev1.Pod) int {
	rest, ok := strings.CutPrefix(p.Name, s.Name+"-")
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return -1
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return -1
	}
	return n
}

func startOrdinal(s *appsv1.StatefulSet) int {
	if s.Spec.Ordinals != nil {
		return int(s.Spec.Ordinals.Start)
	}
	return 0
}

func replicaCount(s *appsv1.StatefulSet) int {
	if s.Spec.Replicas == nil {
		return 1
	}
	return int(*s.Spec.Replicas)
}

func podName(s *appsv1.StatefulSet, ordinal int) string { return s.Name + "-" + strconv.Itoa(ordinal) }

// newPod is the pod of ordinal made from template at revision: its stable name, hostname and
// subdomain (the governing Service), the identity and revision labels, and its claims' volumes.
func newPod(s *appsv1.StatefulSet, t *corev1.PodTemplateSpec, revision string, ordinal int) *corev1.Pod {
	p := controllerkit.PodFromTemplate(s, gvk, t)
	p.GenerateName = ""
	p.Name = podName(s, ordinal)
	setIdentityLabels(p, ordinal)
	p.Labels[RevisionLabel] = revision
	p.Spec.Hostname = p.Name
	p.Spec.Subdomain = s.Spec.ServiceName
	addClaimVolumes(s, p, ordinal)
	return p
}

func setIdentityLabels(p *corev1.Pod, ordinal int) {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[PodNameLabel] = p.Name
	p.Labels[PodIndexLabel] = strconv.Itoa(ordinal)
}

func identityMatches(p *corev1.Pod, ordinal int) bool {
	return p.Labels[PodNameLabel] == p.Name && p.Labels[PodIndexLabel] == strconv.Itoa(ordinal)
}

func isTerminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

func isPending(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodPending || p.Status.Phase == ""
}

func isFinished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}

func runningAndReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && controllerkit.IsPodReady(p)
}

func runningAndAvailable(p *corev1.Pod, minReady int32, now time.Time) bool {
	return p.Status.Phase == corev1.PodRunning && controllerkit.IsPodAvailable(p, minReady, now)
}

// unavailable: missing, terminating, or not running and available; what a rolling update
// counts against maxUnavailable and what OrderedReady waits on.
func unavailable(p *corev1.Pod, minReady int32, now time.Time) bool {
	return p == nil || isTerminating(p) || !runningAndAvailable(p, minReady, now)
}
