package defaults

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/schemas/conversion"
)

// Kubernetes' autoscaling/v2 defaults.
const (
	defaultCPUUtilization         = 80
	DefaultScaleDownStabilization = 300 // seconds
	defaultPolicyPeriod           = 15  // seconds
)

// HorizontalPodAutoscaler defaults as kube-apiserver does: minReplicas 1, 80% average CPU
// utilization when no metric is given, and the default rules for each direction a behavior
// leaves out (a nil behavior stays nil: the controller applies the same defaults).
func HorizontalPodAutoscaler(h *autoscalingv2.HorizontalPodAutoscaler) {
	if h.Spec.MinReplicas == nil {
		h.Spec.MinReplicas = ptr(int32(1))
	}
	if len(h.Spec.Metrics) == 0 {
		h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(int32(defaultCPUUtilization))}}}}
	}
	if b := h.Spec.Behavior; b != nil {
		b.ScaleUp = ScaleUpRules(b.ScaleUp)
		b.ScaleDown = ScaleDownRules(b.ScaleDown)
	}
}

// HorizontalPodAutoscalerV1 defaults an autoscaling/v1 HPA to what it reads back as from its
// stored v2 form: the v2 defaults (minReplicas 1, 80% CPU when no metric is given), with what v1
// has no field for in its annotations. One that does not convert is left to validation.
func HorizontalPodAutoscalerV1(h *autoscalingv1.HorizontalPodAutoscaler) {
	v2, err := conversion.HPAToV2(h)
	if err != nil {
		return
	}
	HorizontalPodAutoscaler(v2)
	if v1, err := conversion.HPAToV1(v2); err == nil {
		v1.TypeMeta = h.TypeMeta
		*h = *v1
	}
}

// ScaleUpRules fills what r leaves out with the scale-up defaults: no stabilization, the
// larger of 4 pods or 100% per 15 s.
func ScaleUpRules(r *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	return fillRules(r, 0, []autoscalingv2.HPAScalingPolicy{
		{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: defaultPolicyPeriod},
		{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: defaultPolicyPeriod},
	})
}

// ScaleDownRules fills what r leaves out with the scale-down defaults: a 300 s stabilization
// window, up to 100% per 15 s.
func ScaleDownRules(r *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	return fillRules(r, DefaultScaleDownStabilization, []autoscalingv2.HPAScalingPolicy{
		{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: defaultPolicyPeriod},
	})
}

func fillRules(r *autoscalingv2.HPAScalingRules, window int32, policies []autoscalingv2.HPAScalingPolicy) *autoscalingv2.HPAScalingRules {
	out := &autoscalingv2.HPAScalingRules{}
	if r != nil {
		out = r.DeepCopy()
	}
	if out.StabilizationWindowSeconds == nil {
		out.StabilizationWindowSeconds = ptr(window)
	}
	if out.SelectPolicy == nil {
		out.SelectPolicy = ptr(autoscalingv2.MaxChangePolicySelect)
	}
	if len(out.Policies) == 0 {
		out.Policies = policies
	}
	return out
}
