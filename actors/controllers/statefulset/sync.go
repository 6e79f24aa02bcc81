package statefulset

import (
	"context"
	"errors"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// view is one sync's picture of a set: replicas[i] is the pod of ordinal start+i (nil when
// missing), condemned the pods of ordinals outside the range, highest ordinal first.
type view struct {
	set       *appsv1.StatefulSet
	key       string
	hist      *history
	now       time.Time
	replicas  []*corev1.Pod
	condemned []*corev1.Pod
	all       []*corev1.Pod // every claimed member, for status and history
}

func (c *controller) sync(ctx context.Context, key string) error {
	s, sel, ok := controllerkit.Workload(c.sets, c.exp, key, func(s *appsv1.StatefulSet) *metav1.LabelSelector { return s.Spec.Selector })
	if !ok {
		return nil
	}
	// Decide on expectations first: the cache read below then includes what they awaited.
	satisfied := c.exp.Satisfied(key)
	pods, claimErr := c.claimPods(ctx, s, sel)
	h, err := c.revisions(ctx, s, sel)
	if err != nil {
		return errors.Join(claimErr, err)
	}
	v := newView(s, key, h, pods, c.now())
	var manageErr error
	if satisfied && s.DeletionTimestamp == nil {
		manageErr = c.manage(ctx, v)
	}
	statusErr := c.updateStatus(ctx, v)
	var histErr error
	if statusErr == nil && manageErr == nil {
		histErr = c.truncateHistory(ctx, s, h, pods)
	}
	c.requeueForAvailability(v)
	return errors.Join(claimErr, manageErr, statusErr, histErr)
}

// claimPods claims the pods named as members of s (<set>-<ordinal>) by selector and owner.
func (c *controller) claimPods(ctx context.Context, s *appsv1.StatefulSet, sel labels.Selector) ([]*corev1.Pod, error) {
	candidates := controllerkit.ClaimCandidates(c.pods, s).Filter(func(o runtime.Object) bool { return ordinalOf(s, o.(*corev1.Pod)) >= 0 })
	claimed, err := controllerkit.Claim(ctx, c.client, s, gvk, sel, candidates, s.DeletionTimestamp == nil)
	return controllerkit.Pods(claimed), err
}

func newView(s *appsv1.StatefulSet, key string, h *history, pods []*corev1.Pod, now time.Time) *view {
	v := &view{set: s, key: key, hist: h, now: now, all: pods, replicas: make([]*corev1.Pod, replicaCount(s))}
	start := startOrdinal(s)
	for _, p := range pods {
		switch i := ordinalOf(s, p) - start; {
		case i >= 0 && i < len(v.replicas):
			v.replicas[i] = p
		default:
			v.condemned = append(v.condemned, p)
		}
	}
	sort.Slice(v.condemned, func(i, j int) bool { return ordinalOf(s, v.condemned[i]) > ordinalOf(s, v.condemned[j]) })
	return v
}

// manage does what kube's StatefulSet controller does, in its order: bring every ordinal of
// the range up (replacing finished pods), then remove the condemned ordinals from the top,
// then roll the template out. OrderedReady stops at the first pod it has to wait for;
// Parallel goes on.
func (c *controller) manage(ctx context.Context, v *view) error {
	ordered := v.set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	// The claims' owners follow the retention policy before any pod goes: a condemned pod
	// must own its claims (whenScaled Delete) by the time it is deleted.
	if len(v.set.Spec.VolumeClaimTemplates) > 0 {
		for _, p := range v.all {
			if err := c.applyRetention(ctx, v.set, p); err != nil {
				return err
			}
		}
	}
	for i := range v.replicas {
		if stop, err := c.processReplica(ctx, v, i, ordered); err != nil || (stop && ordered) {
			return err
		}
	}
	first := v.firstUnavailable()
	for _, p := range v.condemned {
		if stop, err := c.processCondemned(ctx, v, p, first, ordered); err != nil || (stop && ordered) {
			return err
		}
	}
	if v.set.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return nil // pods take the new template when their users delete them
	}
	return c.rollingUpdate(ctx, v)
}

// processReplica handles the pod of replicas[i]; stop means an ordered set must wait.
func (c *controller) processReplica(ctx context.Context, v *view, i int, ordered bool) (stop bool, err error) {
	p := v.replicas[i]
	minReady := v.set.Spec.MinReadySeconds
	switch {
	case p != nil && isFinished(p):
		// Failed or Succeeded: delete it; the next sync creates it again under the same name.
		if !isTerminating(p) {
			return true, c.deletePod(ctx, v, p)
		}
		return true, nil
	case p == nil:
		return true, c.createPod(ctx, v, startOrdinal(v.set)+i)
	case isTerminating(p):
		return true, nil
	case isPending(p):
		// A claim deleted while its pod waited to start is made again, as kube's controller
		// does, so the pod can start.
		if err := c.ensureClaims(ctx, v.set, startOrdinal(v.set)+i); err != nil {
			return true, err
		}
	}
	if !identityMatches(p, startOrdinal(v.set)+i) {
		// An adopted pod gets the labels that name it, as kube's controller gives them.
		next := p.DeepCopy()
		setIdentityLabels(next, startOrdinal(v.set)+i)
		if _, err := c.client.Update(ctx, next); err != nil {
			return true, err
		}
	}
	return !runningAndAvailable(p, minReady, v.now), nil
}

// processCondemned removes p, a pod beyond the range; an ordered set removes one at a time
// and only while every other pod is healthy (first is the one unhealthy pod it may remove).
func (c *controller) processCondemned(ctx context.Context, v *view, p, first *corev1.Pod, ordered bool) (stop bool, err error) {
	if isTerminating(p) {
		return true, nil
	}
	if ordered && unavailable(p, v.set.Spec.MinReadySeconds, v.now) && p != first {
		return true, nil
	}
	return true, c.deletePod(ctx, v, p)
}

// firstUnavailable is the first pod (replicas in order, then condemned from the lowest
// ordinal) that is not running and available; nil when all are.
func (v *view) firstUnavailable() *corev1.Pod {
	for _, p := range v.replicas {
		if p != nil && unavailable(p, v.set.Spec.MinReadySeconds, v.now) {
			return p
		}
	}
	for i := len(v.condemned) - 1; i >= 0; i-- {
		if unavailable(v.condemned[i], v.set.Spec.MinReadySeconds, v.now) {
			return v.condemned[i]
		}
	}
	return nil
}

// rollingUpdate deletes pods not at the update revision from the highest ordinal down to the
// partition, as many at once as maxUnavailable leaves room for (kube's MaxUnavailableStatefulSet).
func (c *controller) rollingUpdate(ctx context.Context, v *view) error {
	partition, maxUnavailable := 0, 1
	if ru := v.set.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		partition = int(ptr.Deref(ru.Partition, 0))
		// Rounded down, as kube does; at least one pod may always be down.
		maxUnavailable, _ = intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(ru.MaxUnavailable, intstr.FromInt32(1)), len(v.replicas), false)
	}
	maxUnavailable = max(maxUnavailable, 1)
	down := 0
	for _, p := range v.replicas {
		if unavailable(p, v.set.Spec.MinReadySeconds, v.now) {
			down++
		}
	}
	budget := maxUnavailable - down
	for i := len(v.replicas) - 1; i >= partition && budget > 0; i-- {
		p := v.replicas[i]
		if p == nil || isTerminating(p) || p.Labels[RevisionLabel] == v.hist.update.Name {
			continue
		}
		if err := c.deletePod(ctx, v, p); err != nil {
			return err
		}
		budget--
	}
	return nil
}

// createPod creates the pod of ordinal: at the current revision below the partition of a
// rolling update, else at the update revision.
func (c *controller) createPod(ctx context.Context, v *view, ordinal int) error {
	s, h := v.set, v.hist
	tmpl, rev := h.updatedTemplate, h.update.Name
	if ru := s.Spec.UpdateStrategy.RollingUpdate; s.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType &&
		ru != nil && ordinal < startOrdinal(s)+int(ptr.Deref(ru.Partition, 0)) {
		tmpl, rev = h.currentTemplate, h.current.Name
	}
	if err := c.ensureClaims(ctx, s, ordinal); err != nil {
		return err
	}
	c.exp.ExpectCreations(v.key, 1)
	if err := c.podCtl.Create(ctx, s, newPod(s, tmpl, rev, ordinal)); err != nil {
		c.exp.CreationObserved(v.key) // a failed create will never be seen
		return err
	}
	return nil
}

func (c *controller) deletePod(ctx context.Context, v *view, p *corev1.Pod) error {
	pk := controllerkit.KeyOf(p)
	c.exp.ExpectDeletions(v.key, []string{pk})
	err := c.podCtl.Delete(ctx, v.set, p)
	if err != nil {
		c.exp.DeletionObserved(v.key, pk)
	}
	return err
}

// updateStatus reports the members; a rolling update whose pods are all updated and ready is
// complete, so the update revision becomes the current one.
func (c *controller) updateStatus(ctx context.Context, v *view) error {
	s, h := v.set, v.hist
	st := appsv1.StatefulSetStatus{
		ObservedGeneration: s.Generation, CurrentRevision: h.current.Name, UpdateRevision: h.update.Name,
		CollisionCount: ptr.To(h.collisions), Conditions: s.Status.Conditions,
	}
	for _, p := range v.all {
		st.Replicas++
		if runningAndReady(p) {
			st.ReadyReplicas++
			if runningAndAvailable(p, s.Spec.MinReadySeconds, v.now) {
				st.AvailableReplicas++
			}
		}
		if !isTerminating(p) {
			if p.Labels[RevisionLabel] == h.current.Name {
				st.CurrentReplicas++
			}
			if p.Labels[RevisionLabel] == h.update.Name {
				st.UpdatedReplicas++
			}
		}
	}
	if s.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType &&
		st.UpdatedReplicas == st.Replicas && st.ReadyReplicas == st.Replicas {
		st.CurrentReplicas, st.CurrentRevision = st.UpdatedReplicas, st.UpdateRevision
	}
	if apiequality.Semantic.DeepEqual(st, s.Status) {
		return nil
	}
	next := s.DeepCopy()
	next.Status = st
	_, err := c.client.UpdateStatus(ctx, next)
	return err
}

// requeueForAvailability wakes the set when a ready pod becomes available: that happens
// minReadySeconds after it became ready, with no event of its own.
func (c *controller) requeueForAvailability(v *view) {
	minReady := v.set.Spec.MinReadySeconds
	if minReady == 0 {
		return
	}
	for _, p := range v.all {
		if runningAndReady(p) && !runningAndAvailable(p, minReady, v.now) {
			c.queue.AddAfter(v.key, time.Duration(minReady)*time.Second+100*time.Millisecond)
			return
		}
	}
}
