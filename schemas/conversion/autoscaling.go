// Package conversion converts between the versions of a kind that Skiff serves over one stored
// version, as kube-apiserver's conversion functions do: autoscaling/v1 HorizontalPodAutoscalers
// are stored as autoscaling/v2, and what v1 has no field for travels in annotations.
package conversion

import (
	"encoding/json"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

// The annotations an autoscaling/v1 HPA carries what only v2 has in (kube's names).
const (
	MetricSpecsAnnotation    = "autoscaling.alpha.kubernetes.io/metrics"
	MetricStatusesAnnotation = "autoscaling.alpha.kubernetes.io/current-metrics"
	ConditionsAnnotation     = "autoscaling.alpha.kubernetes.io/conditions"
	BehaviorSpecsAnnotation  = "autoscaling.alpha.kubernetes.io/behavior"
)

// defaultCPUUtilization is the target a v1 HPA without one gets (v1's implicit default).
const defaultCPUUtilization = 80

// HPAToV2 converts a v1 HPA to v2: targetCPUUtilizationPercentage becomes a cpu Utilization
// metric after the metrics of the metrics annotation, the other annotations become status and
// behavior again and are removed. in is not modified.
func HPAToV2(in *autoscalingv1.HorizontalPodAutoscaler) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	out := &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   in.TypeMeta,
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
			MinReplicas:    copyInt32(in.Spec.MinReplicas),
			MaxReplicas:    in.Spec.MaxReplicas,
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			ObservedGeneration: copyInt64(in.Status.ObservedGeneration),
			LastScaleTime:      in.Status.LastScaleTime.DeepCopy(),
			CurrentReplicas:    in.Status.CurrentReplicas,
			DesiredReplicas:    in.Status.DesiredReplicas,
		},
	}
	out.APIVersion = autoscalingv2.SchemeGroupVersion.String()
	ann := out.Annotations
	var others []autoscalingv1.MetricSpec
	if err := unmarshalAnnotation(ann, MetricSpecsAnnotation, &others); err != nil {
		return nil, err
	}
	for i, m := range others {
		v2, err := metricSpecToV2(m)
		if err != nil {
			return nil, fmt.Errorf("metadata.annotations[%s][%d]: %w", MetricSpecsAnnotation, i, err)
		}
		out.Spec.Metrics = append(out.Spec.Metrics, v2)
	}
	if t := in.Spec.TargetCPUUtilizationPercentage; t != nil {
		out.Spec.Metrics = append(out.Spec.Metrics, cpuUtilization(*t))
	}
	if len(out.Spec.Metrics) == 0 {
		out.Spec.Metrics = []autoscalingv2.MetricSpec{cpuUtilization(defaultCPUUtilization)}
	}
	if _, ok := ann[MetricStatusesAnnotation]; ok {
		// The annotation has every metric's status, the cpu one with its raw value too.
		var statuses []autoscalingv1.MetricStatus
		if err := unmarshalAnnotation(ann, MetricStatusesAnnotation, &statuses); err != nil {
			return nil, err
		}
		for i, s := range statuses {
			v2, err := metricStatusToV2(s)
			if err != nil {
				return nil, fmt.Errorf("metadata.annotations[%s][%d]: %w", MetricStatusesAnnotation, i, err)
			}
			out.Status.CurrentMetrics = append(out.Status.CurrentMetrics, v2)
		}
	} else if c := in.Status.CurrentCPUUtilizationPercentage; c != nil {
		out.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: copyInt32(c)}}}}
	}
	var conditions []autoscalingv1.HorizontalPodAutoscalerCondition
	if err := unmarshalAnnotation(ann, ConditionsAnnotation, &conditions); err != nil {
		return nil, err
	}
	for _, c := range conditions {
		out.Status.Conditions = append(out.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
			Type: autoscalingv2.HorizontalPodAutoscalerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message})
	}
	if err := unmarshalAnnotation(ann, BehaviorSpecsAnnotation, &out.Spec.Behavior); err != nil {
		return nil, err
	}
	DropRoundTripAnnotations(&out.ObjectMeta.Annotations)
	return out, nil
}

// HPAToV1 converts a v2 HPA to v1: the first cpu Resource metric's utilization target is
// targetCPUUtilizationPercentage; every other metric, all current metrics, the conditions and
// the behavior go to annotations. in is not modified.
func HPAToV1(in *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv1.HorizontalPodAutoscaler, error) {
	out := &autoscalingv1.HorizontalPodAutoscaler{
		TypeMeta:   in.TypeMeta,
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
			MinReplicas:    copyInt32(in.Spec.MinReplicas),
			MaxReplicas:    in.Spec.MaxReplicas,
		},
		Status: autoscalingv1.HorizontalPodAutoscalerStatus{
			ObservedGeneration: copyInt64(in.Status.ObservedGeneration),
			LastScaleTime:      in.Status.LastScaleTime.DeepCopy(),
			CurrentReplicas:    in.Status.CurrentReplicas,
			DesiredReplicas:    in.Status.DesiredReplicas,
		},
	}
	out.APIVersion = autoscalingv1.SchemeGroupVersion.String()
	var others []autoscalingv1.MetricSpec
	cpuTaken := false
	for _, m := range in.Spec.Metrics {
		if r := m.Resource; m.Type == autoscalingv2.ResourceMetricSourceType && r != nil && r.Name == corev1.ResourceCPU && r.Target.AverageUtilization != nil && !cpuTaken {
			out.Spec.TargetCPUUtilizationPercentage, cpuTaken = copyInt32(r.Target.AverageUtilization), true
			continue
		}
		v1, err := metricSpecToV1(m)
		if err != nil {
			return nil, err
		}
		others = append(others, v1)
	}
	var statuses []autoscalingv1.MetricStatus
	for _, s := range in.Status.CurrentMetrics {
		if r := s.Resource; s.Type == autoscalingv2.ResourceMetricSourceType && r != nil && r.Name == corev1.ResourceCPU && r.Current.AverageUtilization != nil {
			out.Status.CurrentCPUUtilizationPercentage = copyInt32(r.Current.AverageUtilization)
		}
		v1, err := metricStatusToV1(s)
		if err != nil {
			return nil, err
		}
		statuses = append(statuses, v1)
	}
	var conditions []autoscalingv1.HorizontalPodAutoscalerCondition
	for _, c := range in.Status.Conditions {
		conditions = append(conditions, autoscalingv1.HorizontalPodAutoscalerCondition{
			Type: autoscalingv1.HorizontalPodAutoscalerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message})
	}
	for _, a := range []struct {
		name  string
		value any
		set   bool
	}{
		{MetricSpecsAnnotation, others, len(others) > 0},
		{MetricStatusesAnnotation, statuses, len(statuses) > 0},
		{ConditionsAnnotation, conditions, len(conditions) > 0},
		{BehaviorSpecsAnnotation, in.Spec.Behavior, in.Spec.Behavior != nil},
	} {
		if !a.set {
			continue
		}
		b, err := json.Marshal(a.value)
		if err != nil {
			return nil, err
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[a.name] = string(b)
	}
	return out, nil
}

// DropRoundTripAnnotations removes the v1 round-trip annotations, which a v2 object must not
// carry (kube drops them from v2 writes too); an emptied map becomes nil.
func DropRoundTripAnnotations(ann *map[string]string) {
	for _, a := range []string{MetricSpecsAnnotation, MetricStatusesAnnotation, ConditionsAnnotation, BehaviorSpecsAnnotation} {
		delete(*ann, a)
	}
	if len(*ann) == 0 {
		*ann = nil
	}
}

func unmarshalAnnotation(ann map[string]string, name string, into any) error {
	v, ok := ann[name]
	if !ok || v == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(v), into); err != nil {
		return fmt.Errorf("metadata.annotations[%s]: %w", name, err)
	}
	return nil
}

func cpuUtilization(percent int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &percent}}}
}

func copyInt32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func copyInt64(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
