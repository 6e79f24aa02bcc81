package nodelifecycle

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Taints this controller manages. NoExecute evicts pods (after their tolerations run out);
// NoSchedule keeps new pods off, since every pod tolerates the NoExecute ones for a while.
var (
	unreachable = []corev1.Taint{
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
	}
	notReady = []corev1.Taint{
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
	}
	managed = append(append([]corev1.Taint(nil), unreachable...), notReady...)
)

func (c *controller) sync(ctx context.Context, name string) error {
	o, ok := c.nodes.Get("", name)
	if !ok {
		return nil
	}
	node := o.(*corev1.Node)
	now := c.now()
	silentFor := now.Sub(c.lastHeard(name))
	var errs []error
	if silentFor >= c.cfg.GracePeriod {
		errs = append(errs, c.markUnknown(ctx, node, now))
		errs = append(errs, c.setTaints(ctx, node, unreachable, now))
		errs = append(errs, c.markPodsNotReady(ctx, name, now))
	} else {
		c.queue.AddAfter(name, c.cfg.GracePeriod-silentFor+10*time.Millisecond)
		switch readyStatus(node) {
		case corev1.ConditionTrue:
			errs = append(errs, c.setTaints(ctx, node, nil, now))
		case corev1.ConditionFalse: // reported by the kubelet itself
			errs = append(errs, c.setTaints(ctx, node, notReady, now))
		}
	}
	errs = append(errs, c.evict(ctx, name, now))
	return errors.Join(errs...)
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// markUnknown sets the kubelet-owned conditions to Unknown, as Kubernetes does when it stops
// hearing from a node.
func (c *controller) markUnknown(ctx context.Context, node *corev1.Node, now time.Time) error {
	next := node.DeepCopy()
	changed := false
	ts := metav1.NewTime(now)
	have := map[corev1.NodeConditionType]bool{}
	for i := range next.Status.Conditions {
		cond := &next.Status.Conditions[i]
		have[cond.Type] = true
		if cond.Status != corev1.ConditionUnknown {
			cond.Status, cond.Reason, cond.Message, cond.LastTransitionTime = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status.", ts
			changed = true
		}
	}
	if !have[corev1.NodeReady] {
		next.Status.Conditions = append(next.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
			Reason: "NodeStatusNeverUpdated", Message: "Kubelet never posted node status.", LastHeartbeatTime: ts, LastTransitionTime: ts})
		changed = true
	}
	if !changed {
		return nil
	}
	if _, err := c.client.UpdateStatus(ctx, next); err != nil {
		return err
	}
	c.rec.Eventf(ctx, node, corev1.EventTypeNormal, "NodeNotReady", "Node %s status is now: NodeNotReady", node.Name)
	return nil
}

// setTaints makes want the only condition taints on the node (nil: none of them), keeping
// the timeAdded of those already there.
func (c *controller) setTaints(ctx context.Context, node *corev1.Node, want []corev1.Taint, now time.Time) error {
	isManaged := func(t *corev1.Taint) bool {
		for i := range managed {
			if t.MatchTaint(&managed[i]) {
				return true
			}
		}
		return false
	}
	var taints []corev1.Taint
	for _, t := range node.Spec.Taints {
		if !isManaged(&t) {
			taints = append(taints, t)
		}
	}
	for _, w := range want {
		found := false
		for _, t := range node.Spec.Taints {
			if t.MatchTaint(&w) {
				taints, found = append(taints, t), true
				break
			}
		}
		if !found {
			w.TimeAdded = &metav1.Time{Time: now}
			taints = append(taints, w)
		}
	}
	if apiequality.Semantic.DeepEqual(taints, node.Spec.Taints) || (len(taints) == 0 && len(node.Spec.Taints) == 0) {
		return nil
	}
	next := node.DeepCopy()
	next.Spec.Taints = taints
	_, err := c.client.Update(ctx, next)
	return err
}

func (c *controller) podsOn(node string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range controllerkit.Pods(c.pods.ByIndex(informer.IndexNodeName, node)) {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// markPodsNotReady: nobody can vouch for the pods of a silent node, so services stop routing
// to them.
func (c *controller) markPodsNotReady(ctx context.Context, node string, now time.Time) error {
	var errs []error
	for _, p := range c.podsOn(node) {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		cond := controllerkit.PodReadyCondition(p)
		if cond != nil && cond.Status == corev1.ConditionFalse {
			continue
		}
		next := p.DeepCopy()
		ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "NodeNotReady",
			Message: "the node " + node + " is not ready", LastTransitionTime: metav1.NewTime(now)}
		if cond != nil {
			*controllerkit.PodReadyCondition(next) = ready
		} else {
			next.Status.Conditions = append(next.Status.Conditions, ready)
		}
		if _, err := c.client.UpdateStatus(ctx, next); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DefaultTolerationSeconds is what defaulting writes into every pod's not-ready and
// unreachable tolerations (Kubernetes' DefaultTolerationSeconds admission plugin).
const DefaultTolerationSeconds = 300

// evictAt is when p must leave a node with these NoExecute taints (ok=false: never). The
// not-ready/unreachable tolerations that defaulting wrote (DefaultTolerationSeconds), or their
// absence, stand for defaultFor (Config.PodEvictionTimeout, 300 s unless configured): that is
// what lets a cluster, or a test, choose the default eviction delay. Any other untolerated
// NoExecute taint evicts at once.
func evictAt(p *corev1.Pod, taints []corev1.Taint, defaultFor time.Duration) (time.Time, bool) {
	var at time.Time
	found := false
	for i := range taints {
		t := &taints[i]
		if t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		added := time.Time{}
		if t.TimeAdded != nil {
			added = t.TimeAdded.Time
		}
		stay, forever, tolerated := time.Duration(0), false, false
		for j := range p.Spec.Tolerations {
			tol := &p.Spec.Tolerations[j]
			if !tol.ToleratesTaint(klog.Background(), t, false) {
				continue
			}
			if tol.TolerationSeconds == nil {
				forever = true
				break
			}
			d := time.Duration(max(*tol.TolerationSeconds, 0)) * time.Second
			if *tol.TolerationSeconds == DefaultTolerationSeconds && conditionTaint(t) {
				d = defaultFor
			}
			if !tolerated || d < stay {
				stay = d
			}
			tolerated = true
		}
		if forever {
			continue
		}
		if !tolerated {
			stay = 0
			if conditionTaint(t) {
				stay = defaultFor
			}
		}
		if when := added.Add(stay); !found || when.Before(at) {
			at, found = when, true
		}
	}
	return at, found
}

// evict deletes the pods whose toleration of the node's NoExecute taints has run out, and
// comes back for the next one due.
func (c *controller) evict(ctx context.Context, node string, now time.Time) error {
	o, ok := c.nodes.Get("", node)
	if !ok || !hasNoExecute(o.(*corev1.Node)) {
		return nil
	}
	taints := o.(*corev1.Node).Spec.Taints
	var errs []error
	var next time.Duration
	for _, p := range c.podsOn(node) {
		at, ok := evictAt(p, taints, c.cfg.PodEvictionTimeout)
		if !ok {
			continue
		}
		if wait := at.Sub(now); wait > 0 {
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		uid := p.UID
		err := c.client.Delete(ctx, controllerkit.MustKind("", "pods"), p.Namespace, p.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
			continue
		}
		c.rec.Eventf(ctx, p, corev1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod %s/%s", p.Namespace, p.Name)
	}
	if next > 0 {
		c.queue.AddAfter(node, next+10*time.Millisecond)
	}
	return errors.Join(errs...)
}

func conditionTaint(t *corev1.Taint) bool {
	return t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady
}
