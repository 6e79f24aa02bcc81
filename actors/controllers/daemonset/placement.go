package daemonset

import (
	"encoding/json"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// daemonTolerations are added to every daemon pod, as Kubernetes does: a daemon stays on a
// node that is unreachable, not ready, under pressure or cordoned.
var daemonTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

func withDaemonTolerations(tols []corev1.Toleration) []corev1.Toleration {
	out := append([]corev1.Toleration(nil), tols...)
	for _, d := range daemonTolerations {
		have := false
		for _, t := range tols {
			if t.MatchToleration(&d) {
				have = true
				break
			}
		}
		if !have {
			out = append(out, d)
		}
	}
	return out
}

// shouldRun: the node passes the template's nodeSelector and required node affinity, and the
// pod (with the daemon tolerations) tolerates every NoSchedule and NoExecute taint. A cordoned
// node (spec.unschedulable) still runs daemons, as in Kubernetes.
func shouldRun(pod *corev1.Pod, node *corev1.Node) bool {
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return false
	}
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		tolerated := false
		for j := range pod.Spec.Tolerations {
			if pod.Spec.Tolerations[j].ToleratesTaint(klog.Background(), t, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return false
		}
	}
	return true
}

// templateHash names a template version (FNV-32a of its JSON, safe-encoded).
func templateHash(t *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	data, _ := json.Marshal(t)
	h.Write(data)
	if collisionCount != nil {
		h.Write([]byte(strconv.Itoa(int(*collisionCount))))
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// placementChanged reports whether a node update changed anything shouldRun reads (labels,
// taints); status heartbeats do not, so they wake no DaemonSet.
func placementChanged(old, cur *corev1.Node) bool {
	return !apiequality.Semantic.DeepEqual(old.Labels, cur.Labels) || !apiequality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints)
}
