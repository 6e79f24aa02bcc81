package printers

import (
	"fmt"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	register("horizontalpodautoscalers", printer{
		columns: []metav1.TableColumnDefinition{nameColumn,
			col("Reference", "string", "reference to scaled resource; horizontal pod autoscaler will learn the current resource consumption and will set the desired number of pods by using its Scale subresource."),
			col("Targets", "string", "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used)."),
			col("MinPods", "string", "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down."),
			col("MaxPods", "integer", "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up."),
			col("Replicas", "integer", "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler."),
			ageColumn,
		},
		cells: typed(func(h *autoscalingv2.HorizontalPodAutoscaler, now time.Time) []any {
			minPods := "<unset>"
			if h.Spec.MinReplicas != nil {
				minPods = fmt.Sprint(*h.Spec.MinReplicas)
			}
			ref := h.Spec.ScaleTargetRef.Kind + "/" + h.Spec.ScaleTargetRef.Name
			return []any{h.Name, ref, hpaTargets(h), minPods, int64(h.Spec.MaxReplicas), int64(h.Status.CurrentReplicas), Age(h.CreationTimestamp, now)}
		}),
	})
}

// hpaTargets is kubectl's TARGETS: "cpu: 40%/80%" per metric, <unknown> before a reading.
func hpaTargets(h *autoscalingv2.HorizontalPodAutoscaler) string {
	if len(h.Spec.Metrics) == 0 {
		return "<none>"
	}
	var out []string
	for i, m := range h.Spec.Metrics {
		name, target := resourceTarget(m)
		if target == nil {
			out = append(out, "<unsupported>")
			continue
		}
		var cur *autoscalingv2.MetricValueStatus
		if i < len(h.Status.CurrentMetrics) {
			if s := h.Status.CurrentMetrics[i]; s.Resource != nil {
				cur = &s.Resource.Current
			} else if s.ContainerResource != nil {
				cur = &s.ContainerResource.Current
			}
		}
		now := "<unknown>"
		if target.AverageUtilization != nil {
			if cur != nil && cur.AverageUtilization != nil {
				now = fmt.Sprintf("%d%%", *cur.AverageUtilization)
			}
			out = append(out, fmt.Sprintf("%s: %s/%d%%", name, now, *target.AverageUtilization))
			continue
		}
		if cur != nil && cur.AverageValue != nil {
			now = cur.AverageValue.String()
		}
		want := "<unset>"
		if target.AverageValue != nil {
			want = target.AverageValue.String()
		}
		out = append(out, fmt.Sprintf("%s: %s/%s", name, now, want))
	}
	if len(out) > 2 {
		return strings.Join(out[:2], ", ") + fmt.Sprintf(" + %d more...", len(out)-2)
	}
	return strings.Join(out, ", ")
}

func resourceTarget(m autoscalingv2.MetricSpec) (string, *autoscalingv2.MetricTarget) {
	switch {
	case m.Resource != nil:
		return string(m.Resource.Name), &m.Resource.Target
	case m.ContainerResource != nil:
		return m.ContainerResource.Container + "/" + string(m.ContainerResource.Name), &m.ContainerResource.Target
	}
	return "", nil
}
