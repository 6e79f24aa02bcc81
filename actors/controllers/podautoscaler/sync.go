package podautoscaler

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/defaults"
)

func (c *controller) sync(ctx context.Context, key string) error {
	ns, name := controllerkit.SplitKey(key)
	o, ok := c.hpas.Get(ns, name)
	if !ok {
		c.forget(key)
		return nil
	}
	c.queue.AddAfter(key, c.period) // evaluated every period, whatever happens below
	hpa := o.(*autoscalingv2.HorizontalPodAutoscaler).DeepCopy()
	old := hpa.Status.DeepCopy()
	err := c.reconcile(ctx, key, hpa)
	if !apiequality.Semantic.DeepEqual(old, &hpa.Status) {
		if _, uerr := c.client.UpdateStatus(ctx, hpa); uerr != nil {
			return uerr
		}
	}
	return err
}

// reconcile decides and writes the target's replicas, recording the outcome in hpa.Status.
func (c *controller) reconcile(ctx context.Context, key string, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	now := c.clock.Now()
	ref := hpa.Spec.ScaleTargetRef
	k, scale, err := c.getScale(ctx, hpa.Namespace, ref)
	if err != nil {
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedGetScale", "the HPA controller was unable to get the target's current scale: %v", err)
		c.rec.Eventf(ctx, hpa, corev1.EventTypeWarning, "FailedGetScale", "%v", err)
		return nil // the next period tries again
	}
	c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
	current, l := scale.Spec.Replicas, limitsOf(hpa)
	desired, reason := current, ""
	switch {
	case current == 0 && l.min != 0:
		desired = 0
		c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
	case current > l.max:
		desired, reason = l.max, "Current number of replicas above Spec.MaxReplicas"
	case current < l.min:
		desired, reason = l.min, "Current number of replicas below Spec.MinReplicas"
	default:
		proposed, metric, statuses, err := c.proposal(ctx, hpa, scale, current)
		hpa.Status.CurrentMetrics = statuses
		if err != nil {
			c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "FailedGetResourceMetric", "the HPA was unable to compute the replica count: %v", err)
			c.rec.Eventf(ctx, hpa, corev1.EventTypeWarning, "FailedGetResourceMetric", "%v", err)
			return nil
		}
		c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from %s", metric)
		h := c.historyOf(key)
		d := h.limitRate(now, current, h.stabilize(now, current, proposed, l), l)
		if d.limited {
			c.setCondition(hpa, autoscalingv2.ScalingLimited, corev1.ConditionTrue, d.reason, "%s", d.message)
		} else {
			c.setCondition(hpa, autoscalingv2.ScalingLimited, corev1.ConditionFalse, "DesiredWithinRange", "the desired count is within the acceptable range")
		}
		desired = d.replicas
		if desired > current {
			reason = metric + " above target"
		} else {
			reason = "All metrics below target"
		}
	}
	hpa.Status.CurrentReplicas, hpa.Status.DesiredReplicas = scale.Status.Replicas, desired
	hpa.Status.ObservedGeneration = &hpa.Generation
	if desired == current {
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size")
		return nil
	}
	scale.Spec.Replicas = desired
	if err := c.putScale(ctx, k, hpa.Namespace, scale); err != nil {
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale", "the HPA controller was unable to update the target scale: %v", err)
		c.rec.Eventf(ctx, hpa, corev1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", desired, reason, err)
		return err
	}
	c.historyOf(key).record(now, current, desired, l)
	c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededRescale", "the HPA controller was able to update the target scale to %d", desired)
	c.rec.Eventf(ctx, hpa, corev1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: %s", desired, reason)
	t := metav1.NewTime(now)
	hpa.Status.LastScaleTime = &t
	return nil
}

// limitsOf is the HPA's bounds and behavior with Kubernetes' defaults filled in (an HPA
// without spec.behavior gets the defaults of each direction).
func limitsOf(hpa *autoscalingv2.HorizontalPodAutoscaler) limits {
	l := limits{min: 1, max: hpa.Spec.MaxReplicas}
	if hpa.Spec.MinReplicas != nil {
		l.min = *hpa.Spec.MinReplicas
	}
	var up, down *autoscalingv2.HPAScalingRules
	if b := hpa.Spec.Behavior; b != nil {
		up, down = b.ScaleUp, b.ScaleDown
	}
	l.up, l.down = defaults.ScaleUpRules(up), defaults.ScaleDownRules(down)
	return l
}

// getScale reads the target's scale subresource; a kind without one is an error naming it.
func (c *controller) getScale(ctx context.Context, ns string, ref autoscalingv2.CrossVersionObjectReference) (*schemas.Kind, *autoscalingv1.Scale, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, nil, err
	}
	k, ok := schemas.ByGVK(gv.WithKind(ref.Kind))
	if !ok || !k.HasSubresource("scale") {
		return nil, nil, fmt.Errorf("%s %s has no scale subresource (Deployments, ReplicaSets and StatefulSets have one)", ref.APIVersion, ref.Kind)
	}
	body, err := c.client.Raw(ctx, http.MethodGet, apiclient.Path(k, ns, ref.Name, "scale"), "", nil)
	if err != nil {
		return nil, nil, err
	}
	var s autoscalingv1.Scale
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, nil, err
	}
	return k, &s, nil
}

func (c *controller) putScale(ctx context.Context, k *schemas.Kind, ns string, s *autoscalingv1.Scale) error {
	body, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = c.client.Raw(ctx, http.MethodPut, apiclient.Path(k, ns, s.Name, "scale"), "application/json", body)
	return err
}

// setCondition sets a condition, keeping its transition time while the status stays.
func (c *controller) setCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType,
	status corev1.ConditionStatus, reason, format string, args ...any) {
	cond := autoscalingv2.HorizontalPodAutoscalerCondition{Type: t, Status: status, Reason: reason, Message: fmt.Sprintf(format, args...),
		LastTransitionTime: metav1.NewTime(c.clock.Now())}
	for i, old := range hpa.Status.Conditions {
		if old.Type == t {
			if old.Status == status {
				cond.LastTransitionTime = old.LastTransitionTime
			}
			hpa.Status.Conditions[i] = cond
			return
		}
	}
	hpa.Status.Conditions = append(hpa.Status.Conditions, cond)
}

// selectedPods are the pods of the HPA's namespace that the scale's selector picks.
func (c *controller) selectedPods(ns string, scale *autoscalingv1.Scale) ([]*corev1.Pod, labels.Selector, error) {
	if scale.Status.Selector == "" {
		return nil, nil, fmt.Errorf("the target's scale has no selector")
	}
	sel, err := labels.Parse(scale.Status.Selector)
	if err != nil {
		return nil, nil, fmt.Errorf("the target's selector %q: %w", scale.Status.Selector, err)
	}
	var out []*corev1.Pod
	for _, o := range c.pods.ByIndex(informer.IndexNamespace, ns) {
		if p := o.(*corev1.Pod); sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, sel, nil
}
