package deployment

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
)

// newRSReplicas is how large the new ReplicaSet may be now: all the way for Recreate; for
// RollingUpdate, up to the room maxSurge leaves above the desired count.
func newRSReplicas(d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) int32 {
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return desired(d)
	}
	surge, _ := fenceposts(d)
	current := sumSpec(all)
	maxTotal := desired(d) + surge
	if current >= maxTotal {
		return replicasOf(newRS)
	}
	up := min(maxTotal-current, desired(d)-replicasOf(newRS))
	return replicasOf(newRS) + max(up, 0)
}

func (c *controller) rolloutRolling(ctx context.Context, r *run) error {
	newRS, old, err := c.newReplicaSet(ctx, r, true)
	if err != nil {
		return err
	}
	all := nonNil(append(append([]*appsv1.ReplicaSet(nil), old...), newRS))
	if r.fresh {
		scaled, err := c.reconcileNew(ctx, r, all, newRS)
		if err != nil {
			return err
		}
		if !scaled {
			if _, err := c.reconcileOld(ctx, r, all, old, newRS); err != nil {
				return err
			}
		}
		if complete(r.d, &r.d.Status) {
			if err := c.cleanup(ctx, r, old); err != nil {
				return err
			}
		}
	}
	return c.syncStatus(ctx, r, newRS, old)
}

func (c *controller) reconcileNew(ctx context.Context, r *run, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (bool, error) {
	if newRS == nil {
		return false, nil
	}
	want := desired(r.d)
	if replicasOf(newRS) > want {
		return c.scale(ctx, r, newRS, want)
	}
	return c.scale(ctx, r, newRS, newRSReplicas(r.d, all, newRS))
}

// reconcileOld scales old ReplicaSets down as far as maxUnavailable allows: first the pods that
// are not available anyway, then available ones while enough stay available.
func (c *controller) reconcileOld(ctx context.Context, r *run, all, old []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (bool, error) {
	if sumSpec(old) == 0 {
		return false, nil
	}
	_, maxUnavailable := fenceposts(r.d)
	minAvailable := desired(r.d) - maxUnavailable
	newUnavailable := replicasOf(newRS)
	if newRS != nil {
		newUnavailable -= newRS.Status.AvailableReplicas
	}
	maxScaledDown := sumSpec(all) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}
	oldest := sortByCreation(activeRSs(old))
	var cleaned int32
	for _, rs := range oldest {
		if cleaned >= maxScaledDown {
			break
		}
		unhealthy := replicasOf(rs) - rs.Status.AvailableReplicas
		if unhealthy <= 0 {
			continue
		}
		n := min(maxScaledDown-cleaned, unhealthy)
		if _, err := c.scale(ctx, r, rs, replicasOf(rs)-n); err != nil {
			return cleaned > 0, err
		}
		cleaned += n
	}
	// Available pods may go while the total available stays at minAvailable or above.
	available := sumStatus(all, func(s *appsv1.ReplicaSetStatus) int32 { return s.AvailableReplicas })
	if available <= minAvailable {
		return cleaned > 0, nil
	}
	budget := available - minAvailable
	var down int32
	for _, rs := range oldest {
		if down >= budget {
			break
		}
		if replicasOf(rs) == 0 {
			continue
		}
		n := min(replicasOf(rs), budget-down)
		if _, err := c.scale(ctx, r, rs, replicasOf(rs)-n); err != nil {
			return true, err
		}
		down += n
	}
	return cleaned+down > 0, nil
}
