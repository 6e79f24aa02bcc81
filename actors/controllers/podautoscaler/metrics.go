package podautoscaler

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// proposal is the largest replica count the HPA's metrics propose, the metric that proposed
// it (for the ScalingActive message) and each metric's current figures. As in Kubernetes, a
// metric that cannot be computed stops a scale-down (its pods might need more) but not a
// scale-up the others ask for.
func (c *controller) proposal(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, scale *autoscalingv1.Scale, current int32) (int32, string, []autoscalingv2.MetricStatus, error) {
	pods, sel, err := c.selectedPods(hpa.Namespace, scale)
	if err != nil {
		return 0, "", nil, err
	}
	usage, err := c.podMetrics(ctx, hpa.Namespace, sel)
	if err != nil {
		return 0, "", nil, fmt.Errorf("unable to get metrics from resource metrics API: %w", err)
	}
	calc := calculator{tolerance: tolerance{up: defaultTolerance, down: defaultTolerance}, cpuInitialization: cpuInitializationPeriod,
		readinessDelay: initialReadinessDelay, now: c.clock.Now()}
	if b := hpa.Spec.Behavior; b != nil {
		calc.tolerance = tolerance{up: toleranceOf(b.ScaleUp), down: toleranceOf(b.ScaleDown)}
	}
	var (
		best     int32
		bestName string
		statuses []autoscalingv2.MetricStatus
		firstErr error
		invalid  int
	)
	for i, m := range hpa.Spec.Metrics {
		res, container, target := resourceOf(m)
		p, err := calc.resourceReplicas(current, targetOf(target, res), pods, perPod(usage, res, container), res, container)
		if err != nil {
			invalid++
			if firstErr == nil {
				firstErr = fmt.Errorf("metrics[%d] (%s): %w", i, res, err)
			}
			continue
		}
		statuses = append(statuses, metricStatus(m, res, p))
		if p.replicas > best || bestName == "" {
			best, bestName = p.replicas, describe(res, target)
		}
	}
	if invalid == len(hpa.Spec.Metrics) || (invalid > 0 && best < current) {
		return 0, "", statuses, firstErr
	}
	return best, bestName, statuses, nil
}

func toleranceOf(r *autoscalingv2.HPAScalingRules) float64 {
	if r == nil || r.Tolerance == nil {
		return defaultTolerance
	}
	return r.Tolerance.AsApproximateFloat64()
}

func resourceOf(m autoscalingv2.MetricSpec) (corev1.ResourceName, string, autoscalingv2.MetricTarget) {
	if m.ContainerResource != nil {
		return m.ContainerResource.Name, m.ContainerResource.Container, m.ContainerResource.Target
	}
	return m.Resource.Name, "", m.Resource.Target // validation admits only these two
}

func targetOf(t autoscalingv2.MetricTarget, res corev1.ResourceName) resourceTarget {
	if t.Type == autoscalingv2.UtilizationMetricType {
		return resourceTarget{utilization: t.AverageUtilization}
	}
	return resourceTarget{averageValue: t.AverageValue.MilliValue()}
}

func describe(res corev1.ResourceName, t autoscalingv2.MetricTarget) string {
	if t.Type == autoscalingv2.UtilizationMetricType {
		return fmt.Sprintf("%s resource utilization (percentage of request)", res)
	}
	return fmt.Sprintf("%s resource", res)
}

func metricStatus(m autoscalingv2.MetricSpec, res corev1.ResourceName, p proposal) autoscalingv2.MetricStatus {
	format := resource.DecimalSI
	if res == corev1.ResourceMemory {
		format = resource.BinarySI
	}
	cur := autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(p.average, format), AverageUtilization: p.utilization}
	if m.ContainerResource != nil {
		return autoscalingv2.MetricStatus{Type: m.Type, ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Name: res, Container: m.ContainerResource.Container, Current: cur}}
	}
	return autoscalingv2.MetricStatus{Type: m.Type, Resource: &autoscalingv2.ResourceMetricStatus{Name: res, Current: cur}}
}

// podMetrics reads the selected pods' usage from metrics.k8s.io, as the Kubernetes controller
// does through the apiserver (here: the nodes' cgroup samples, see the apiserver).
func (c *controller) podMetrics(ctx context.Context, ns string, sel labels.Selector) ([]metricsv1beta1.PodMetrics, error) {
	path := "/apis/metrics.k8s.io/v1beta1/namespaces/" + ns + "/pods?labelSelector=" + url.QueryEscape(sel.String())
	body, err := c.client.Raw(ctx, http.MethodGet, path, "", nil)
	if err != nil {
		return nil, err
	}
	var list metricsv1beta1.PodMetricsList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// perPod is each pod's usage of res in milli-units: its containers' sum, or the named one's.
func perPod(items []metricsv1beta1.PodMetrics, res corev1.ResourceName, container string) map[string]podMetric {
	out := map[string]podMetric{}
	for _, m := range items {
		var sum int64
		found := false
		for _, c := range m.Containers {
			if container != "" && c.Name != container {
				continue
			}
			if q, ok := c.Usage[res]; ok {
				sum, found = sum+q.MilliValue(), true
			}
		}
		if found {
			out[m.Name] = podMetric{value: sum, timestamp: m.Timestamp.Time, window: m.Window.Duration}
		}
	}
	return out
}
