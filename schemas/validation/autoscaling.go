package validation

import (
	"fmt"
	"slices"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/schemas/conversion"
)

// Kubernetes' bounds on an HPA's behavior.
const (
	maxPolicyPeriodSeconds        = 1800
	maxStabilizationWindowSeconds = 3600
)

// HorizontalPodAutoscaler validates as kube-apiserver does (autoscaling validation), and refuses
// by field what Skiff does not measure: metrics other than the cpu and memory of Resource and
// ContainerResource (there is no custom or external metrics API to read them from).
func HorizontalPodAutoscaler(h *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	errs := objectMeta(&h.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	s, p := &h.Spec, specPath
	if s.MinReplicas != nil && *s.MinReplicas < 1 {
		errs = append(errs, field.Invalid(p.Child("minReplicas"), *s.MinReplicas, "must be greater than or equal to 1"))
	}
	if s.MaxReplicas < 1 {
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), s.MaxReplicas, "must be greater than 0"))
	}
	if s.MinReplicas != nil && s.MaxReplicas < *s.MinReplicas {
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), s.MaxReplicas, "must be greater than or equal to `minReplicas`"))
	}
	errs = append(errs, scaleTargetRef(s.ScaleTargetRef, p.Child("scaleTargetRef"))...)
	for i, m := range s.Metrics {
		errs = append(errs, metricSpec(m, p.Child("metrics").Index(i))...)
	}
	if b := s.Behavior; b != nil {
		errs = append(errs, scalingRules(b.ScaleUp, p.Child("behavior", "scaleUp"))...)
		errs = append(errs, scalingRules(b.ScaleDown, p.Child("behavior", "scaleDown"))...)
	}
	return errs
}

func scaleTargetRef(ref autoscalingv2.CrossVersionObjectReference, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct{ name, v string }{{"kind", ref.Kind}, {"name", ref.Name}} {
		if f.v == "" {
			errs = append(errs, field.Required(p.Child(f.name), ""))
		}
		errs = append(errs, messages(p.Child(f.name), f.v, pathSegmentName(f.v, false))...)
	}
	if _, err := schema.ParseGroupVersion(ref.APIVersion); err != nil {
		errs = append(errs, field.Invalid(p.Child("apiVersion"), ref.APIVersion, err.Error()))
	}
	return errs
}

var (
	servedMetricTypes = []string{string(autoscalingv2.ContainerResourceMetricSourceType), string(autoscalingv2.ResourceMetricSourceType)}
	measuredResources = []string{string(corev1.ResourceCPU), string(corev1.ResourceMemory)}
)

func metricSpec(m autoscalingv2.MetricSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	present := map[string]bool{"object": m.Object != nil, "pods": m.Pods != nil, "resource": m.Resource != nil,
		"containerResource": m.ContainerResource != nil, "external": m.External != nil}
	var want string
	switch m.Type {
	case "":
		return append(errs, field.Required(p.Child("type"), "must specify a metric source type"))
	case autoscalingv2.ResourceMetricSourceType:
		want = "resource"
		if m.Resource != nil {
			errs = append(errs, resourceSource(m.Resource.Name, m.Resource.Target, p.Child("resource"))...)
		}
	case autoscalingv2.ContainerResourceMetricSourceType:
		want = "containerResource"
		if c := m.ContainerResource; c != nil {
			if c.Container == "" {
				errs = append(errs, field.Required(p.Child("containerResource", "container"), "must specify a container"))
			}
			errs = append(errs, resourceSource(c.Name, c.Target, p.Child("containerResource"))...)
		}
	case autoscalingv2.PodsMetricSourceType, autoscalingv2.ObjectMetricSourceType, autoscalingv2.ExternalMetricSourceType:
		return append(errs, field.Invalid(p.Child("type"), m.Type,
			"custom and external metrics are not served (there is no custom.metrics.k8s.io or external.metrics.k8s.io API); use Resource or ContainerResource"))
	default:
		return append(errs, field.NotSupported(p.Child("type"), m.Type, servedMetricTypes))
	}
	if !present[want] {
		errs = append(errs, field.Required(p.Child(want), "must populate information for the given metric source"))
	}
	for name, set := range present {
		if set && name != want {
			errs = append(errs, field.Forbidden(p.Child(name), "must populate the given metric source only"))
		}
	}
	return errs
}

func resourceSource(name corev1.ResourceName, t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch name {
	case "":
		errs = append(errs, field.Required(p.Child("name"), "must specify a resource name"))
	case corev1.ResourceCPU, corev1.ResourceMemory:
	default:
		errs = append(errs, field.NotSupported(p.Child("name"), name, measuredResources))
	}
	tp := p.Child("target")
	switch t.Type {
	case "":
		errs = append(errs, field.Required(tp.Child("type"), "must specify a metric target type"))
	case autoscalingv2.UtilizationMetricType:
		if t.AverageUtilization == nil {
			errs = append(errs, field.Required(tp.Child("averageUtilization"), "must set averageUtilization when type is Utilization"))
		}
	case autoscalingv2.AverageValueMetricType:
		if t.AverageValue == nil {
			errs = append(errs, field.Required(tp.Child("averageValue"), "must set averageValue when type is AverageValue"))
		}
	case autoscalingv2.ValueMetricType:
		errs = append(errs, field.Invalid(tp.Child("type"), t.Type, "must be either Utilization or AverageValue"))
	default:
		errs = append(errs, field.NotSupported(tp.Child("type"), t.Type, []string{string(autoscalingv2.UtilizationMetricType), string(autoscalingv2.AverageValueMetricType)}))
	}
	if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
		errs = append(errs, field.Invalid(tp.Child("averageUtilization"), *t.AverageUtilization, "must be greater than 0"))
	}
	if t.AverageValue != nil && t.AverageValue.Sign() != 1 {
		errs = append(errs, field.Invalid(tp.Child("averageValue"), t.AverageValue.String(), "must be positive"))
	}
	if t.Value != nil {
		errs = append(errs, field.Forbidden(tp.Child("value"), "a resource metric's target is an average (averageUtilization or averageValue)"))
	}
	return errs
}

var (
	policyTypes    = []string{string(autoscalingv2.PodsScalingPolicy), string(autoscalingv2.PercentScalingPolicy)}
	selectPolicies = []string{string(autoscalingv2.MaxChangePolicySelect), string(autoscalingv2.MinChangePolicySelect), string(autoscalingv2.DisabledPolicySelect)}
)

func scalingRules(r *autoscalingv2.HPAScalingRules, p *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if w := r.StabilizationWindowSeconds; w != nil && (*w < 0 || *w > maxStabilizationWindowSeconds) {
		errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), *w, fmt.Sprintf("must be between 0 and %d", maxStabilizationWindowSeconds)))
	}
	if s := r.SelectPolicy; s != nil && !slices.Contains(selectPolicies, string(*s)) {
		errs = append(errs, field.NotSupported(p.Child("selectPolicy"), *s, selectPolicies))
	}
	if r.Tolerance != nil && r.Tolerance.Sign() < 0 {
		errs = append(errs, field.Invalid(p.Child("tolerance"), r.Tolerance.String(), "must be greater than or equal to 0"))
	}
	if len(r.Policies) == 0 {
		errs = append(errs, field.Required(p.Child("policies"), "must specify at least one Policy"))
	}
	for i, pol := range r.Policies {
		pp := p.Child("policies").Index(i)
		if !slices.Contains(policyTypes, string(pol.Type)) {
			errs = append(errs, field.NotSupported(pp.Child("type"), pol.Type, policyTypes))
		}
		if pol.Value <= 0 {
			errs = append(errs, field.Invalid(pp.Child("value"), pol.Value, "must be greater than zero"))
		}
		if pol.PeriodSeconds <= 0 {
			errs = append(errs, field.Invalid(pp.Child("periodSeconds"), pol.PeriodSeconds, "must be greater than zero"))
		} else if pol.PeriodSeconds > maxPolicyPeriodSeconds {
			errs = append(errs, field.Invalid(pp.Child("periodSeconds"), pol.PeriodSeconds, fmt.Sprintf("must be less than or equal to %d", maxPolicyPeriodSeconds)))
		}
	}
	return errs
}

// HorizontalPodAutoscalerV1 validates an autoscaling/v1 HPA as the v2 object it is stored as
// (kube-apiserver validates the internal form of either version): its metrics annotation must
// convert, and targetCPUUtilizationPercentage is checked as the cpu metric it becomes.
func HorizontalPodAutoscalerV1(h *autoscalingv1.HorizontalPodAutoscaler) field.ErrorList {
	if t := h.Spec.TargetCPUUtilizationPercentage; t != nil && *t < 1 {
		return field.ErrorList{field.Invalid(specPath.Child("targetCPUUtilizationPercentage"), *t, "must be greater than 0")}
	}
	v2, err := conversion.HPAToV2(h)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations"), "", err.Error())}
	}
	return HorizontalPodAutoscaler(v2)
}
