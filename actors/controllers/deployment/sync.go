package deployment

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// run is one sync of one Deployment: a private copy of it and of its ReplicaSets.
type run struct {
	d   *appsv1.Deployment
	rss []*appsv1.ReplicaSet // claimed, deep copies
	// fresh: every ReplicaSet's status has caught up with its spec, so counts can be trusted
	// for scaling decisions (see replicaset.updateStatus).
	fresh bool
}

func (c *controller) sync(ctx context.Context, key string) error {
	ns, name := controllerkit.SplitKey(key)
	o, ok := c.deps.Get(ns, name)
	if !ok {
		return nil
	}
	d := o.(*appsv1.Deployment).DeepCopy()
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() {
		return nil // validation forbids this; a Deployment that selects everything does nothing
	}
	candidates := controllerkit.ClaimCandidates(c.rss, d)
	claimed, claimErr := controllerkit.Claim(ctx, c.client, d, gvk, sel, candidates, true)
	r := &run{d: d, fresh: true}
	for _, o := range claimed {
		rs := o.(*appsv1.ReplicaSet).DeepCopy()
		r.rss = append(r.rss, rs)
		if rs.Status.ObservedGeneration < rs.Generation {
			r.fresh = false
		}
	}
	var syncErr error
	switch {
	case d.DeletionTimestamp != nil:
		newRS, old := c.split(r)
		syncErr = c.syncStatus(ctx, r, newRS, old)
	case d.Spec.Paused:
		syncErr = c.syncPaused(ctx, r)
	case d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType:
		syncErr = c.rolloutRecreate(ctx, r)
	default:
		syncErr = c.rolloutRolling(ctx, r)
	}
	return errors.Join(claimErr, syncErr)
}

// split finds the new ReplicaSet (nil if none yet) and the old ones.
func (c *controller) split(r *run) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet) {
	newRS := findNewRS(r.d, r.rss)
	var old []*appsv1.ReplicaSet
	for _, rs := range r.rss {
		if rs != newRS {
			old = append(old, rs)
		}
	}
	return newRS, old
}

// newReplicaSet returns the ReplicaSet of the current template, bringing its revision up to
// date, or creates it (with create) at the revision after every old one.
func (c *controller) newReplicaSet(ctx context.Context, r *run, create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	d := r.d
	newRS, old := c.split(r)
	rev := maxRevision(old) + 1
	if newRS != nil {
		if revision(newRS) < rev || annotationsStale(newRS, d) {
			next := newRS.DeepCopy()
			if revision(next) < rev {
				setAnnotation(&next.ObjectMeta, RevisionAnnotation, strconv.FormatInt(rev, 10))
			}
			setReplicaAnnotations(next, d)
			out, err := c.client.Update(ctx, next)
			if err != nil {
				return nil, nil, err
			}
			*newRS = *out.(*appsv1.ReplicaSet)
		}
		if err := c.syncDeploymentRevision(ctx, r, newRS, false, ReasonFoundNewRS, fmt.Sprintf("Found new replica set %q", newRS.Name)); err != nil {
			return nil, nil, err
		}
		return newRS, old, nil
	}
	if !create {
		return nil, old, nil
	}
	hash := ComputeHash(&d.Spec.Template, d.Status.CollisionCount)
	tmpl := d.Spec.Template.DeepCopy()
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[HashLabel] = hash
	sel := d.Spec.Selector.DeepCopy()
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[HashLabel] = hash
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: d.Name + "-" + hash, Namespace: d.Namespace, Labels: tmpl.Labels,
			Annotations:     map[string]string{RevisionAnnotation: strconv.FormatInt(rev, 10)},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, gvk)},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(0)), MinReadySeconds: d.Spec.MinReadySeconds, Selector: sel, Template: *tmpl},
	}
	setReplicaAnnotations(rs, d)
	all := append(append([]*appsv1.ReplicaSet(nil), old...), rs)
	if r.fresh { // else the counts it would be sized from may be stale: start at 0
		rs.Spec.Replicas = ptr.To(newRSReplicas(d, all, rs))
	}
	out, err := c.client.Create(ctx, rs)
	if apierrors.IsAlreadyExists(err) {
		// Usually our own create that the cache has not shown yet: then it is the new one.
		if o, gerr := c.client.Get(ctx, controllerkit.MustKind("apps", "replicasets"), d.Namespace, rs.Name); gerr == nil {
			if got := o.(*appsv1.ReplicaSet); controllerkit.IsOwnedBy(got, d) &&
				(equalIgnoreHash(&got.Spec.Template, &d.Spec.Template) || got.Labels[HashLabel] == hash) {
				r.rss = append(r.rss, got)
				return got, old, nil
			}
		}
		// Another template already owns the name: bump the collision count to get a new hash.
		next := d.DeepCopy()
		next.Status.CollisionCount = ptr.To(ptr.Deref(d.Status.CollisionCount, 0) + 1)
		if _, uerr := c.client.UpdateStatus(ctx, next); uerr != nil {
			return nil, nil, uerr
		}
		return nil, nil, fmt.Errorf("replica set %s exists with another template; collision count now %d", rs.Name, *next.Status.CollisionCount)
	}
	if err != nil {
		c.rec.Eventf(ctx, d, corev1.EventTypeWarning, "FailedCreate", "Failed to create new replica set %q: %v", rs.Name, err)
		return nil, nil, err
	}
	created := out.(*appsv1.ReplicaSet)
	if n := replicasOf(created); n > 0 {
		c.rec.Eventf(ctx, d, corev1.EventTypeNormal, ReasonScalingReplicaSet, "Scaled up replica set %s from 0 to %d", created.Name, n)
	}
	r.rss = append(r.rss, created)
	if err := c.syncDeploymentRevision(ctx, r, created, true, ReasonNewRSCreated, fmt.Sprintf("Created new replica set %q", created.Name)); err != nil {
		return nil, nil, err
	}
	return created, old, nil
}

func setAnnotation(m *metav1.ObjectMeta, k, v string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[k] = v
}

func setReplicaAnnotations(rs *appsv1.ReplicaSet, d *appsv1.Deployment) {
	surge, _ := fenceposts(d)
	setAnnotation(&rs.ObjectMeta, DesiredReplicasAnnotation, strconv.Itoa(int(desired(d))))
	setAnnotation(&rs.ObjectMeta, MaxReplicasAnnotation, strconv.Itoa(int(desired(d)+surge)))
}

func annotationsStale(rs *appsv1.ReplicaSet, d *appsv1.Deployment) bool {
	surge, _ := fenceposts(d)
	return rs.Annotations[DesiredReplicasAnnotation] != strconv.Itoa(int(desired(d))) ||
		rs.Annotations[MaxReplicasAnnotation] != strconv.Itoa(int(desired(d)+surge))
}

// syncDeploymentRevision copies the new ReplicaSet's revision onto the Deployment (kubectl
// rollout history reads it there) and records that a new ReplicaSet was created (always) or
// found (when no progress is recorded yet).
func (c *controller) syncDeploymentRevision(ctx context.Context, r *run, newRS *appsv1.ReplicaSet, created bool, reason, msg string) error {
	d := r.d
	rev := newRS.Annotations[RevisionAnnotation]
	if d.Annotations[RevisionAnnotation] != rev {
		next := d.DeepCopy()
		setAnnotation(&next.ObjectMeta, RevisionAnnotation, rev)
		out, err := c.client.Update(ctx, next)
		if err != nil {
			return err
		}
		r.d = out.(*appsv1.Deployment)
		d = r.d
	}
	if d.Spec.ProgressDeadlineSeconds == nil || (!created && progressing(d) != nil) {
		return nil
	}
	next := d.DeepCopy()
	setCondition(&next.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reason, msg, c.now()))
	out, err := c.client.UpdateStatus(ctx, next)
	if err != nil {
		return err
	}
	r.d = out.(*appsv1.Deployment)
	return nil
}

// scale sets a ReplicaSet's replicas (and the annotations that record the Deployment's size).
func (c *controller) scale(ctx context.Context, r *run, rs *appsv1.ReplicaSet, to int32) (bool, error) {
	from := replicasOf(rs)
	if from == to && !annotationsStale(rs, r.d) {
		return false, nil
	}
	next := rs.DeepCopy()
	next.Spec.Replicas = ptr.To(to)
	setReplicaAnnotations(next, r.d)
	out, err := c.client.Update(ctx, next)
	if err != nil {
		return false, err
	}
	*rs = *out.(*appsv1.ReplicaSet)
	if from != to {
		dir := "up"
		if to < from {
			dir = "down"
		}
		c.rec.Eventf(ctx, r.d, corev1.EventTypeNormal, ReasonScalingReplicaSet, "Scaled %s replica set %s from %d to %d", dir, rs.Name, from, to)
	}
	return from != to, nil
}

// syncPaused: a paused Deployment is not rolled out; only its size follows spec.replicas when
// a single ReplicaSet is active.
func (c *controller) syncPaused(ctx context.Context, r *run) error {
	newRS, old, err := c.newReplicaSet(ctx, r, false)
	if err != nil {
		return err
	}
	all := append(append([]*appsv1.ReplicaSet(nil), old...), newRS)
	all = nonNil(all)
	if active := activeRSs(all); len(active) <= 1 && r.fresh {
		target := newRS
		if len(active) == 1 {
			target = active[0]
		} else if target == nil && len(all) > 0 {
			target = sortByCreation(all)[len(all)-1]
		}
		if target != nil {
			if _, err := c.scale(ctx, r, target, desired(r.d)); err != nil {
				return err
			}
		}
	}
	if err := c.cleanup(ctx, r, old); err != nil {
		return err
	}
	return c.syncStatus(ctx, r, newRS, old)
}

func nonNil(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil {
			out = append(out, rs)
		}
	}
	return out
}
