package validation

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var specPath = field.NewPath("spec")

// Deployment validates a Deployment.
func Deployment(d *appsv1.Deployment) field.ErrorList {
	errs := objectMeta(&d.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	s := &d.Spec
	errs = append(errs, replicas(s.Replicas)...)
	errs = append(errs, workloadTemplate(s.Selector, &s.Template, "deployment")...)
	errs = append(errs, nonNegative(int64(s.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	if s.RevisionHistoryLimit != nil {
		errs = append(errs, nonNegative(int64(*s.RevisionHistoryLimit), specPath.Child("revisionHistoryLimit"))...)
	}
	if pd := s.ProgressDeadlineSeconds; pd != nil {
		pp := specPath.Child("progressDeadlineSeconds")
		errs = append(errs, nonNegative(int64(*pd), pp)...)
		if *pd <= s.MinReadySeconds {
			errs = append(errs, field.Invalid(pp, *pd, "must be greater than minReadySeconds"))
		}
	}
	sp := specPath.Child("strategy")
	errs = append(errs, oneOf(s.Strategy.Type, sp.Child("type"), appsv1.RecreateDeploymentStrategyType, appsv1.RollingUpdateDeploymentStrategyType)...)
	switch ru := s.Strategy.RollingUpdate; {
	case ru == nil:
		if s.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
			errs = append(errs, field.Required(sp.Child("rollingUpdate"), "this should be defaulted and never be nil"))
		}
	case s.Strategy.Type == appsv1.RecreateDeploymentStrategyType:
		errs = append(errs, field.Forbidden(sp.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'"))
	default:
		errs = append(errs, rollingUpdate(ru.MaxUnavailable, ru.MaxSurge, sp.Child("rollingUpdate"))...)
	}
	return errs
}

// ReplicaSet validates a ReplicaSet.
func ReplicaSet(rs *appsv1.ReplicaSet) field.ErrorList {
	errs := objectMeta(&rs.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, replicas(rs.Spec.Replicas)...)
	errs = append(errs, nonNegative(int64(rs.Spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	return append(errs, workloadTemplate(rs.Spec.Selector, &rs.Spec.Template, "replicaset")...)
}

// DaemonSet validates a DaemonSet.
func DaemonSet(ds *appsv1.DaemonSet) field.ErrorList {
	errs := objectMeta(&ds.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	s := &ds.Spec
	errs = append(errs, workloadTemplate(s.Selector, &s.Template, "daemonset")...)
	errs = append(errs, nonNegative(int64(s.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	if s.RevisionHistoryLimit != nil {
		errs = append(errs, nonNegative(int64(*s.RevisionHistoryLimit), specPath.Child("revisionHistoryLimit"))...)
	}
	up := specPath.Child("updateStrategy")
	errs = append(errs, oneOf(s.UpdateStrategy.Type, up.Child("type"), appsv1.OnDeleteDaemonSetStrategyType, appsv1.RollingUpdateDaemonSetStrategyType)...)
	if ru := s.UpdateStrategy.RollingUpdate; ru != nil {
		if s.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
			errs = append(errs, field.Forbidden(up.Child("rollingUpdate"), "may not be specified when strategy `type` is 'OnDelete'"))
		} else {
			errs = append(errs, rollingUpdate(ru.MaxUnavailable, ru.MaxSurge, up.Child("rollingUpdate"))...)
		}
	}
	return errs
}

func replicas(r *int32) field.ErrorList {
	if r == nil {
		return nil
	}
	return nonNegative(int64(*r), specPath.Child("replicas"))
}

// rollingUpdate refuses a rollout that can make no progress (no surge and no unavailability).
func rollingUpdate(mu, ms *intstr.IntOrString, p *field.Path) field.ErrorList {
	errs := intOrPercent(mu, p.Child("maxUnavailable"), true)
	errs = append(errs, intOrPercent(ms, p.Child("maxSurge"), false)...)
	if isZero(mu) && isZero(ms) {
		errs = append(errs, field.Invalid(p.Child("maxUnavailable"), mu.String(), "may not be 0 when `maxSurge` is 0"))
	}
	return errs
}

// workloadTemplate checks the selector, that it selects the template's labels, and the template's
// Pod spec, which must restart always and may not carry a deadline.
func workloadTemplate(sel *metav1.LabelSelector, t *corev1.PodTemplateSpec, what string) field.ErrorList {
	sp := specPath.Child("selector")
	errs := selector(sel, sp, what)
	tp := specPath.Child("template")
	errs = append(errs, labelMap(t.Labels, tp.Child("metadata", "labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, tp.Child("metadata", "annotations"))...)
	if sel != nil && len(sel.MatchLabels)+len(sel.MatchExpressions) > 0 {
		if s, err := metav1.LabelSelectorAsSelector(sel); err == nil && !s.Matches(labels.Set(t.Labels)) {
			errs = append(errs, field.Invalid(tp.Child("metadata", "labels"), t.Labels, "`selector` does not match template `labels`"))
		}
	}
	ps := tp.Child("spec")
	errs = append(errs, PodSpec(&t.Spec, ps)...)
	if t.Spec.RestartPolicy != corev1.RestartPolicyAlways && t.Spec.RestartPolicy != "" {
		errs = append(errs, field.NotSupported(ps.Child("restartPolicy"), t.Spec.RestartPolicy, []corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(ps.Child("activeDeadlineSeconds"), "activeDeadlineSeconds in "+what+" is not Supported"))
	}
	return errs
}

func workloadUpdate(n, o *metav1.ObjectMeta, ns, os *metav1.LabelSelector) field.ErrorList {
	errs := metaUpdate(n, o)
	return append(errs, immutable(ns, os, specPath.Child("selector"))...)
}
