package replicaset

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

func (c *controller) sync(ctx context.Context, key string) error {
	rs, sel, ok := controllerkit.Workload(c.rss, c.exp, key, func(rs *appsv1.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector })
	if !ok {
		return nil
	}
	// Decide on expectations first: the cache read below then includes what they awaited.
	satisfied := c.exp.Satisfied(key)
	candidates := controllerkit.ClaimCandidates(c.pods, rs).Filter(func(o runtime.Object) bool { return controllerkit.IsPodActive(o.(*corev1.Pod)) })
	claimed, claimErr := controllerkit.Claim(ctx, c.client, rs, gvk, sel, candidates, true)
	owned := controllerkit.Pods(claimed)
	// With no orphan to adopt and every controlled pod kept, the owned pods are the active
	// ones the ReplicaSet controls: those the ready-pods index counts.
	ownsControlled := len(candidates.Orphans) == 0 && len(claimed) == len(candidates.Controlled)
	var manageErr error
	if satisfied && rs.DeletionTimestamp == nil {
		manageErr = c.manage(ctx, rs, key, owned)
	}
	statusErr := c.updateStatus(ctx, rs, key, owned, ownsControlled, manageErr)
	return errors.Join(claimErr, manageErr, statusErr)
}

func replicas(rs *appsv1.ReplicaSet) int {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return int(*rs.Spec.Replicas)
}

func (c *controller) manage(ctx context.Context, rs *appsv1.ReplicaSet, key string, owned []*corev1.Pod) error {
	diff := len(owned) - replicas(rs)
	switch {
	case diff < 0:
		n := min(-diff, BurstReplicas)
		c.exp.ExpectCreations(key, n)
		_, attempted, err := controllerkit.SlowStartBatch(n, 1, func() error {
			err := c.podCtl.Create(ctx, rs, controllerkit.PodFromTemplate(rs, gvk, &rs.Spec.Template))
			if err != nil {
				c.exp.CreationObserved(key) // a failed create will never be seen
			}
			return err
		})
		for i := attempted; i < n; i++ {
			c.exp.CreationObserved(key)
		}
		return err
	case diff > 0:
		victims := podsToDelete(owned, min(diff, BurstReplicas))
		keys := make([]string, len(victims))
		for i, p := range victims {
			keys[i] = controllerkit.KeyOf(p)
		}
		c.exp.ExpectDeletions(key, keys)
		var wg sync.WaitGroup
		errs := make([]error, len(victims))
		for i, p := range victims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if errs[i] = c.podCtl.Delete(ctx, rs, p); errs[i] != nil {
					c.exp.DeletionObserved(key, keys[i])
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	return nil
}

// podsToDelete picks n pods, the ones whose loss hurts least first: unscheduled, then pending,
// unknown, running; not ready before ready; ready for less time; more restarts; newer.
func podsToDelete(pods []*corev1.Pod, n int) []*corev1.Pod {
	ps := append([]*corev1.Pod(nil), pods...)
	sort.SliceStable(ps, func(i, j int) bool { return deleteFirst(ps[i], ps[j]) })
	return ps[:min(n, len(ps))]
}

func phaseRank(p corev1.PodPhase) int {
	switch p {
	case corev1.PodPending:
		return 0
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	}
	return 3
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n = max(n, s.RestartCount)
	}
	return n
}

func deleteFirst(a, b *corev1.Pod) bool {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if ra, rb := phaseRank(a.Status.Phase), phaseRank(b.Status.Phase); ra != rb {
		return ra < rb
	}
	ra, rb := controllerkit.IsPodReady(a), controllerkit.IsPodReady(b)
	if ra != rb {
		return !ra
	}
	if ra && rb {
		ta, tb := controllerkit.PodReadyCondition(a).LastTransitionTime, controllerkit.PodReadyCondition(b).LastTransitionTime
		if !ta.Equal(&tb) {
			return tb.Before(&ta) // a became ready later
		}
	}
	if x, y := restarts(a), restarts(b); x != y {
		return x > y
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name > b.Name
}

// updateStatus reports the owned pods. observedGeneration only advances when no creates or
// deletes are in flight, so a reader (the Deployment controller) that sees
// observedGeneration == generation knows the counts reflect the current spec.
func (c *controller) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, key string, owned []*corev1.Pod, ownsControlled bool, manageErr error) error {
	now := c.now()
	st := appsv1.ReplicaSetStatus{
		Replicas:           int32(len(owned)),
		ObservedGeneration: rs.Status.ObservedGeneration,
		Conditions:         rs.Status.Conditions,
	}
	if c.exp.Satisfied(key) {
		st.ObservedGeneration = rs.Generation
	}
	tmpl := labels.SelectorFromSet(rs.Spec.Template.Labels)
	// An owned pod matches the selector; when that requires every template label (a
	// Deployment's ReplicaSets), it is fully labeled without looking at its labels again.
	selectorHasTemplate := rs.Spec.Selector != nil && tmpl.Matches(labels.Set(rs.Spec.Selector.MatchLabels))
	var nextAvailable time.Duration
	if ownsControlled && selectorHasTemplate && rs.Spec.MinReadySeconds == 0 {
		// Counted, not walked: a 30,000-pod ReplicaSet's sync would otherwise read every pod's
		// conditions. The index is read a moment after the owned pods were: it may count a pod
		// that became ready since (as the next sync would), never more pods than are owned.
		st.FullyLabeledReplicas = int32(len(owned))
		ready := int32(min(c.pods.IndexLen(controllerkit.IndexReadyPods, string(rs.UID)), len(owned)))
		st.ReadyReplicas, st.AvailableReplicas = ready, ready // available once ready, with minReadySeconds 0
	} else {
		nextAvailable = walkStatus(rs, owned, tmpl, selectorHasTemplate, now, &st)
	}
	st.Conditions = failureCondition(st.Conditions, manageErr, len(owned) < replicas(rs), now)
	if nextAvailable > 0 {
		c.queue.AddAfter(key, nextAvailable)
	}
	if apiequality.Semantic.DeepEqual(st, rs.Status) {
		return nil
	}
	next := rs.DeepCopy()
	next.Status = st
	_, err := c.client.UpdateStatus(ctx, next)
	return err
}

// walkStatus counts the owned pods that are fully labeled, ready and available into st, and
// says when the next ready one becomes available (0: none waits for minReadySeconds).
func walkStatus(rs *appsv1.ReplicaSet, owned []*corev1.Pod, tmpl labels.Selector, selectorHasTemplate bool, now time.Time, st *appsv1.ReplicaSetStatus) (nextAvailable time.Duration) {
	for _, p := range owned {
		if selectorHasTemplate || tmpl.Matches(labels.Set(p.Labels)) {
			st.FullyLabeledReplicas++
		}
		if controllerkit.IsPodReady(p) {
			st.ReadyReplicas++
			if controllerkit.IsPodAvailable(p, rs.Spec.MinReadySeconds, now) {
				st.AvailableReplicas++
			} else if c := controllerkit.PodReadyCondition(p); c != nil {
				wait := c.LastTransitionTime.Add(time.Duration(rs.Spec.MinReadySeconds)*time.Second + time.Second).Sub(now)
				if nextAvailable == 0 || wait < nextAvailable {
					nextAvailable = max(wait, 100*time.Millisecond)
				}
			}
		}
	}
	return nextAvailable
}

// failureCondition sets ReplicaFailure while creating or deleting fails, and clears it after.
func failureCondition(conds []appsv1.ReplicaSetCondition, err error, creating bool, now time.Time) []appsv1.ReplicaSetCondition {
	var out []appsv1.ReplicaSetCondition
	for _, c := range conds {
		if c.Type != appsv1.ReplicaSetReplicaFailure {
			out = append(out, c)
		}
	}
	if err == nil {
		return out
	}
	reason := "FailedDelete"
	if creating {
		reason = "FailedCreate"
	}
	for _, c := range conds {
		if c.Type == appsv1.ReplicaSetReplicaFailure && c.Reason == reason && c.Message == err.Error() {
			return append(out, c)
		}
	}
	return append(out, appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue,
		Reason: reason, Message: err.Error(), LastTransitionTime: metav1.NewTime(now)})
}
