package kubelet

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/metrics"
)

// podStartup is observed once per pod, when this node first reports all its containers Ready.
// The buckets run from a warm start (image present) to a slow pull.
var podStartup = func() prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "skiff_pod_startup_duration_seconds",
		Help:    "Seconds from a pod's creation to the kubelet first reporting all its containers Ready.",
		Buckets: []float64{.5, 1, 2, 3, 5, 8, 10, 15, 20, 30, 45, 60, 120, 300, 600},
	})
	metrics.Register(h)
	return h
}()

// observeStartup records the pod's startup when st is the first Ready status this agent writes
// for it. A pod already Ready before (agent restart, readiness flapping) is not counted again.
func (k *kubelet) observeStartup(pod *corev1.Pod, st corev1.PodStatus) {
	if !statusReady(st) || statusReady(pod.Status) {
		return
	}
	k.mu.Lock()
	seen := k.started[pod.UID]
	k.started[pod.UID] = true
	k.mu.Unlock()
	if !seen {
		podStartup.Observe(time.Since(pod.CreationTimestamp.Time).Seconds())
	}
}

func statusReady(st corev1.PodStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
