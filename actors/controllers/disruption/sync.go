package disruption

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
)

func (c *controller) sync(ctx context.Context, key string) error {
	ns, name := controllerkit.SplitKey(key)
	o, ok := c.pdbs.Get(ns, name)
	if !ok {
		return nil
	}
	pdb := o.(*policyv1.PodDisruptionBudget)
	if pdb.DeletionTimestamp != nil {
		return nil
	}
	pods, err := c.podsOf(pdb)
	if err == nil {
		err = c.trySync(ctx, pdb, pods)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		// A budget whose numbers cannot be worked out allows nothing, as in Kubernetes.
		if ferr := c.failSafe(ctx, pdb, err); ferr != nil {
			return ferr
		}
		return err
	}
	return nil
}

func (c *controller) podsOf(pdb *policyv1.PodDisruptionBudget) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, p := range controllerkit.Pods(c.pods.ByIndex(informer.IndexNamespace, pdb.Namespace)) {
		if sel.Matches(labelsOf(p)) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (c *controller) trySync(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) error {
	if len(pods) == 0 {
		c.rec.Eventf(ctx, pdb, corev1.EventTypeNormal, "NoPods", "No matching pods found")
	}
	expected, desired, unmanaged, err := c.expectedPodCount(pdb, pods)
	if err != nil {
		c.rec.Eventf(ctx, pdb, corev1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", err)
		return err
	}
	if len(unmanaged) > 0 {
		c.rec.Eventf(ctx, pdb, corev1.EventTypeNormal, "UnmanagedPods", "Pods selected by this PodDisruptionBudget (selector: %v) were found "+
			"to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. "+
			"To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.", pdb.Spec.Selector)
	}
	now := c.now()
	disrupted, recheck := c.disruptedPods(ctx, pdb, pods, now)
	healthy := countHealthy(pods, disrupted, now)
	if err := c.updateStatus(ctx, pdb, healthy, desired, expected, disrupted); err != nil {
		return err
	}
	if recheck != nil {
		c.queue.AddAfter(controllerkit.KeyOf(pdb), recheck.Sub(now))
	}
	return nil
}

// expectedPodCount is Kubernetes' rule: an integer minAvailable counts the selected pods; a
// percentage, or maxUnavailable, scales from the replicas of the pods' controllers.
func (c *controller) expectedPodCount(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) (expected, desired int32, unmanaged []string, err error) {
	switch spec := pdb.Spec; {
	case spec.MaxUnavailable != nil:
		if expected, unmanaged, err = c.expectedScale(pods); err != nil {
			return 0, 0, nil, err
		}
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, err
		}
		return expected, max(expected-int32(maxUnavailable), 0), unmanaged, nil
	case spec.MinAvailable != nil && spec.MinAvailable.Type == intstr.Int:
		return int32(len(pods)), spec.MinAvailable.IntVal, nil, nil
	case spec.MinAvailable != nil:
		if expected, unmanaged, err = c.expectedScale(pods); err != nil {
			return 0, 0, nil, err
		}
		minAvailable, err := intstr.GetScaledValueFromIntOrPercent(spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, err
		}
		return expected, int32(minAvailable), unmanaged, nil
	}
	return 0, 0, nil, nil
}

// expectedScale sums the replicas of the controllers owning the pods, each counted once: a
// ReplicaSet's own, or its Deployment's when a Deployment controls it. A pod with no
// controller is unmanaged; one whose controller has no scale fails the sync, as in Kubernetes.
func (c *controller) expectedScale(pods []*corev1.Pod) (int32, []string, error) {
	scales := map[types.UID]int32{} // by the object whose replicas count
	looked := map[types.UID]bool{}  // controller references already resolved
	var unmanaged []string
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil {
			unmanaged = append(unmanaged, p.Name)
			continue
		}
		if looked[ref.UID] {
			continue
		}
		looked[ref.UID] = true
		uid, scale, ok := c.scaleOf(p.Namespace, ref)
		if !ok {
			return 0, nil, fmt.Errorf("found no controllers for pod %q", p.Name)
		}
		scales[uid] = scale
	}
	var sum int32
	for _, n := range scales {
		sum += n
	}
	return sum, unmanaged, nil
}

// scaleOf resolves a pod's controller to the object whose replicas count: a StatefulSet, the
// ReplicaSet, or the Deployment controlling it. Pods of two ReplicaSets of one Deployment (a
// rollout) then count the Deployment once.
func (c *controller) scaleOf(ns string, ref *metav1.OwnerReference) (types.UID, int32, bool) {
	if s, ok := controllerkit.Owner[*appsv1.StatefulSet](c.sets, ns, ref, "StatefulSet"); ok {
		return s.UID, replicas(s.Spec.Replicas), true
	}
	rs, ok := controllerkit.Owner[*appsv1.ReplicaSet](c.rss, ns, ref, "ReplicaSet")
	if !ok {
		return "", 0, false
	}
	if d, ok := controllerkit.Owner[*appsv1.Deployment](c.deploys, ns, metav1.GetControllerOf(rs), "Deployment"); ok {
		return d.UID, replicas(d.Spec.Replicas), true
	}
	if dref := metav1.GetControllerOf(rs); dref != nil && dref.Kind == "Deployment" {
		return "", 0, false // its Deployment is not in the cache (yet)
	}
	return rs.UID, replicas(rs.Spec.Replicas), true
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// disruptedPods keeps the evictions whose deletions are still expected, and says when the
// first of them expires.
func (c *controller) disruptedPods(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, now time.Time) (map[string]metav1.Time, *time.Time) {
	out := map[string]metav1.Time{}
	var recheck *time.Time
	for _, p := range pods {
		at, found := pdb.Status.DisruptedPods[p.Name]
		if p.DeletionTimestamp != nil || !found {
			continue
		}
		expires := at.Add(DeletionTimeout)
		if expires.Before(now) {
			c.rec.Eventf(ctx, p, corev1.EventTypeWarning, "NotDeleted", "Pod was expected by PDB %s/%s to be deleted but it wasn't", pdb.Namespace, pdb.Name)
			continue
		}
		if recheck == nil || expires.Before(*recheck) {
			recheck = &expires
		}
		out[p.Name] = at
	}
	return out, recheck
}

// countHealthy counts ready pods that are neither being deleted nor about to be.
func countHealthy(pods []*corev1.Pod, disrupted map[string]metav1.Time, now time.Time) int32 {
	var n int32
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if at, found := disrupted[p.Name]; found && at.Add(DeletionTimeout).After(now) {
			continue
		}
		if controllerkit.IsPodReady(p) {
			n++
		}
	}
	return n
}

func (c *controller) updateStatus(ctx context.Context, pdb *policyv1.PodDisruptionBudget, healthy, desired, expected int32, disrupted map[string]metav1.Time) error {
	allowed := healthy - desired
	if expected <= 0 || allowed <= 0 {
		allowed = 0
	}
	st := pdb.Status
	if st.CurrentHealthy == healthy && st.DesiredHealthy == desired && st.ExpectedPods == expected && st.DisruptionsAllowed == allowed &&
		st.ObservedGeneration == pdb.Generation && apiequality.Semantic.DeepEqual(disrupted, nonNil(st.DisruptedPods)) {
		return nil
	}
	next := pdb.DeepCopy()
	next.Status = policyv1.PodDisruptionBudgetStatus{CurrentHealthy: healthy, DesiredHealthy: desired, ExpectedPods: expected,
		DisruptionsAllowed: allowed, DisruptedPods: disrupted, ObservedGeneration: pdb.Generation, Conditions: next.Status.Conditions} // the copy's: the condition is set in place
	pdbhelper.UpdateDisruptionAllowedCondition(next)
	_, err := c.client.UpdateStatus(ctx, next) // a CAS on the revision read: evictions in between make it a 409 and a retry
	return err
}

func (c *controller) failSafe(ctx context.Context, pdb *policyv1.PodDisruptionBudget, cause error) error {
	next := pdb.DeepCopy()
	next.Status.DisruptionsAllowed = 0
	next.Status.ObservedGeneration = pdb.Generation
	setCondition(&next.Status.Conditions, metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse,
		Reason: policyv1.SyncFailedReason, Message: cause.Error(), ObservedGeneration: pdb.Generation})
	if apiequality.Semantic.DeepEqual(next.Status, pdb.Status) {
		return nil
	}
	_, err := c.client.UpdateStatus(ctx, next)
	return err
}

func labelsOf(p *corev1.Pod) labels.Set { return labels.Set(p.Labels) }

func nonNil(m map[string]metav1.Time) map[string]metav1.Time {
	if m == nil {
		return map[string]metav1.Time{}
	}
	return m
}

// setCondition keeps a condition's transition time when its status does not change.
func setCondition(conds *[]metav1.Condition, c metav1.Condition) {
	c.LastTransitionTime = metav1.Now()
	meta.SetStatusCondition(conds, c)
}
