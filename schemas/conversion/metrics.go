package conversion

import (
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Only Resource and ContainerResource metrics convert: they are the only ones Skiff admits
// (there is no custom or external metrics API), so the others are refused, naming the type.

func unsupported(t any) error {
	return fmt.Errorf("metric type %q is not supported: only Resource and ContainerResource metrics are served", t)
}

// metricTarget is v1's target as v2's: a utilization when one is given, else an average value.
func metricTarget(utilization *int32, average *resource.Quantity) autoscalingv2.MetricTarget {
	t := autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageUtilization: copyInt32(utilization)}
	if utilization != nil {
		t.Type = autoscalingv2.UtilizationMetricType
	}
	if average != nil {
		q := average.DeepCopy()
		t.AverageValue = &q
	}
	return t
}

func copyQuantity(q *resource.Quantity) *resource.Quantity {
	if q == nil {
		return nil
	}
	c := q.DeepCopy()
	return &c
}

func metricSpecToV2(m autoscalingv1.MetricSpec) (autoscalingv2.MetricSpec, error) {
	out := autoscalingv2.MetricSpec{Type: autoscalingv2.MetricSourceType(m.Type)}
	switch {
	case m.Type == autoscalingv1.ResourceMetricSourceType && m.Resource != nil:
		out.Resource = &autoscalingv2.ResourceMetricSource{Name: m.Resource.Name,
			Target: metricTarget(m.Resource.TargetAverageUtilization, m.Resource.TargetAverageValue)}
	case m.Type == autoscalingv1.ContainerResourceMetricSourceType && m.ContainerResource != nil:
		c := m.ContainerResource
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricSource{Name: c.Name, Container: c.Container,
			Target: metricTarget(c.TargetAverageUtilization, c.TargetAverageValue)}
	default:
		return out, unsupported(m.Type)
	}
	return out, nil
}

func metricSpecToV1(m autoscalingv2.MetricSpec) (autoscalingv1.MetricSpec, error) {
	out := autoscalingv1.MetricSpec{Type: autoscalingv1.MetricSourceType(m.Type)}
	switch {
	case m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil:
		out.Resource = &autoscalingv1.ResourceMetricSource{Name: m.Resource.Name,
			TargetAverageUtilization: copyInt32(m.Resource.Target.AverageUtilization), TargetAverageValue: copyQuantity(m.Resource.Target.AverageValue)}
	case m.Type == autoscalingv2.ContainerResourceMetricSourceType && m.ContainerResource != nil:
		c := m.ContainerResource
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricSource{Name: c.Name, Container: c.Container,
			TargetAverageUtilization: copyInt32(c.Target.AverageUtilization), TargetAverageValue: copyQuantity(c.Target.AverageValue)}
	default:
		return out, unsupported(m.Type)
	}
	return out, nil
}

func metricStatusToV2(s autoscalingv1.MetricStatus) (autoscalingv2.MetricStatus, error) {
	out := autoscalingv2.MetricStatus{Type: autoscalingv2.MetricSourceType(s.Type)}
	switch {
	case s.Type == autoscalingv1.ResourceMetricSourceType && s.Resource != nil:
		out.Resource = &autoscalingv2.ResourceMetricStatus{Name: s.Resource.Name, Current: autoscalingv2.MetricValueStatus{
			AverageUtilization: copyInt32(s.Resource.CurrentAverageUtilization), AverageValue: copyQuantity(&s.Resource.CurrentAverageValue)}}
	case s.Type == autoscalingv1.ContainerResourceMetricSourceType && s.ContainerResource != nil:
		c := s.ContainerResource
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{Name: c.Name, Container: c.Container, Current: autoscalingv2.MetricValueStatus{
			AverageUtilization: copyInt32(c.CurrentAverageUtilization), AverageValue: copyQuantity(&c.CurrentAverageValue)}}
	default:
		return out, unsupported(s.Type)
	}
	return out, nil
}

func metricStatusToV1(s autoscalingv2.MetricStatus) (autoscalingv1.MetricStatus, error) {
	out := autoscalingv1.MetricStatus{Type: autoscalingv1.MetricSourceType(s.Type)}
	value := func(q *resource.Quantity) resource.Quantity {
		if q == nil {
			return resource.Quantity{}
		}
		return q.DeepCopy()
	}
	switch {
	case s.Type == autoscalingv2.ResourceMetricSourceType && s.Resource != nil:
		out.Resource = &autoscalingv1.ResourceMetricStatus{Name: s.Resource.Name,
			CurrentAverageUtilization: copyInt32(s.Resource.Current.AverageUtilization), CurrentAverageValue: value(s.Resource.Current.AverageValue)}
	case s.Type == autoscalingv2.ContainerResourceMetricSourceType && s.ContainerResource != nil:
		c := s.ContainerResource
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricStatus{Name: c.Name, Container: c.Container,
			CurrentAverageUtilization: copyInt32(c.Current.AverageUtilization), CurrentAverageValue: value(c.Current.AverageValue)}
	default:
		return out, unsupported(s.Type)
	}
	return out, nil
}
