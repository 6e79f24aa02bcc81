package deployment

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

func newCondition(t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason, msg string, now time.Time) appsv1.DeploymentCondition {
	ts := metav1.NewTime(now)
	return appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason, Message: msg, LastUpdateTime: ts, LastTransitionTime: ts}
}

func getCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

func progressing(d *appsv1.Deployment) *appsv1.DeploymentCondition {
	return getCondition(&d.Status, appsv1.DeploymentProgressing)
}

// setCondition replaces the condition of c's type; an unchanged status and reason keeps the
// old one, timestamps and all.
func setCondition(st *appsv1.DeploymentStatus, c appsv1.DeploymentCondition) {
	if cur := getCondition(st, c.Type); cur != nil {
		if cur.Status == c.Status && cur.Reason == c.Reason {
			return
		}
		if cur.Status == c.Status {
			c.LastTransitionTime = cur.LastTransitionTime
		}
	}
	removeCondition(st, c.Type)
	st.Conditions = append(st.Conditions, c)
}

func removeCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	var out []appsv1.DeploymentCondition
	for _, c := range st.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	st.Conditions = out
}

// complete: every desired replica runs the current template and is available.
func complete(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	n := desired(d)
	return st.UpdatedReplicas == n && st.Replicas == n && st.AvailableReplicas == n && st.ObservedGeneration >= d.Generation
}

// madeProgress: the rollout moved since the last status (more updated, ready or available
// pods, or fewer old ones).
func madeProgress(old, cur *appsv1.DeploymentStatus) bool {
	return cur.UpdatedReplicas > old.UpdatedReplicas || cur.ReadyReplicas > old.ReadyReplicas ||
		cur.AvailableReplicas > old.AvailableReplicas ||
		cur.Replicas-cur.UpdatedReplicas < old.Replicas-old.UpdatedReplicas
}

func (c *controller) timedOut(d *appsv1.Deployment, now time.Time) bool {
	cond := progressing(d)
	if d.Spec.ProgressDeadlineSeconds == nil || cond == nil || cond.Reason == ReasonNewRSAvailable {
		return false
	}
	if cond.Reason == ReasonTimedOut {
		return true
	}
	return cond.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Before(now)
}

func (c *controller) calculateStatus(d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) appsv1.DeploymentStatus {
	available := sumStatus(all, func(s *appsv1.ReplicaSetStatus) int32 { return s.AvailableReplicas })
	st := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            sumStatus(all, func(s *appsv1.ReplicaSetStatus) int32 { return s.Replicas }),
		ReadyReplicas:       sumStatus(all, func(s *appsv1.ReplicaSetStatus) int32 { return s.ReadyReplicas }),
		AvailableReplicas:   available,
		UnavailableReplicas: max(sumSpec(all)-available, 0),
		CollisionCount:      d.Status.CollisionCount,
		Conditions:          append([]appsv1.DeploymentCondition(nil), d.Status.Conditions...),
	}
	if newRS != nil {
		st.UpdatedReplicas = newRS.Status.Replicas
	}
	_, maxUnavailable := fenceposts(d)
	if available >= desired(d)-maxUnavailable {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, ReasonMinAvailable, "Deployment has minimum availability.", c.now()))
	} else {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, ReasonMinUnavailable, "Deployment does not have minimum availability.", c.now()))
	}
	return st
}

// syncStatus writes counters and conditions: Available, and Progressing with its deadline.
func (c *controller) syncStatus(ctx context.Context, r *run, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) error {
	d, now := r.d, c.now()
	all := nonNil(append(append([]*appsv1.ReplicaSet(nil), old...), newRS))
	st := c.calculateStatus(d, all, newRS)
	rsName := d.Name
	if newRS != nil {
		rsName = newRS.Name
	}
	cur := getCondition(&st, appsv1.DeploymentProgressing)
	switch {
	case d.Spec.ProgressDeadlineSeconds == nil:
		removeCondition(&st, appsv1.DeploymentProgressing)
	case d.Spec.Paused:
		setCondition(&st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonPaused, "Deployment is paused", now))
	case cur != nil && cur.Reason == ReasonPaused:
		setCondition(&st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonResumed, "Deployment is resumed", now))
	case st.Replicas == st.UpdatedReplicas && cur != nil && cur.Reason == ReasonNewRSAvailable && complete(d, &st):
		// Already complete: nothing to report.
	case complete(d, &st):
		setCondition(&st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewRSAvailable,
			fmt.Sprintf("ReplicaSet %q has successfully progressed.", rsName), now))
	case madeProgress(&d.Status, &st):
		cond := newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonRSUpdated, fmt.Sprintf("ReplicaSet %q is progressing.", rsName), now)
		if cur != nil && cur.Status == corev1.ConditionTrue {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
		removeCondition(&st, appsv1.DeploymentProgressing) // progress renews lastUpdateTime
		st.Conditions = append(st.Conditions, cond)
	case c.timedOut(d, now):
		if cur == nil || cur.Reason != ReasonTimedOut {
			c.rec.Eventf(ctx, d, corev1.EventTypeWarning, ReasonTimedOut, "ReplicaSet %q has timed out progressing.", rsName)
		}
		setCondition(&st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonTimedOut,
			fmt.Sprintf("ReplicaSet %q has timed out progressing.", rsName), now))
	}
	sortConditions(&st)
	c.requeueForDeadline(d, &st, now)
	if apiequality.Semantic.DeepEqual(st, d.Status) {
		return nil
	}
	next := d.DeepCopy()
	next.Status = st
	out, err := c.client.UpdateStatus(ctx, next)
	if err != nil {
		return err
	}
	r.d = out.(*appsv1.Deployment)
	return nil
}

func sortConditions(st *appsv1.DeploymentStatus) {
	sort.SliceStable(st.Conditions, func(i, j int) bool { return st.Conditions[i].Type < st.Conditions[j].Type })
}

// requeueForDeadline: nothing else will wake a rollout that stopped moving, so look again
// when its progress deadline passes.
func (c *controller) requeueForDeadline(d *appsv1.Deployment, st *appsv1.DeploymentStatus, now time.Time) {
	cond := getCondition(st, appsv1.DeploymentProgressing)
	if d.Spec.ProgressDeadlineSeconds == nil || d.Spec.Paused || cond == nil || complete(d, st) ||
		cond.Reason == ReasonTimedOut || cond.Reason == ReasonNewRSAvailable {
		return
	}
	after := cond.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds)*time.Second + 100*time.Millisecond).Sub(now)
	c.queue.AddAfter(controllerkit.KeyOf(d), max(after, 10*time.Millisecond))
}

// cleanup deletes the oldest scaled-down ReplicaSets beyond revisionHistoryLimit.
func (c *controller) cleanup(ctx context.Context, r *run, old []*appsv1.ReplicaSet) error {
	limit := r.d.Spec.RevisionHistoryLimit
	if limit == nil {
		return nil
	}
	var cleanable []*appsv1.ReplicaSet
	for _, rs := range old {
		if rs.DeletionTimestamp == nil {
			cleanable = append(cleanable, rs)
		}
	}
	diff := len(cleanable) - int(*limit)
	if diff <= 0 {
		return nil
	}
	sort.SliceStable(cleanable, func(i, j int) bool { return revision(cleanable[i]) < revision(cleanable[j]) })
	rsKind := controllerkit.MustKind("apps", "replicasets")
	for _, rs := range cleanable[:diff] {
		if rs.Status.Replicas != 0 || replicasOf(rs) != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		uid := rs.UID
		err := c.client.Delete(ctx, rsKind, rs.Namespace, rs.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
