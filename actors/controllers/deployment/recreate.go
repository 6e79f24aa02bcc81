package deployment

import (
	"context"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// rolloutRecreate scales every old ReplicaSet to zero, waits until none of their pods is left,
// then brings the new ReplicaSet up to full size.
func (c *controller) rolloutRecreate(ctx context.Context, r *run) error {
	newRS, old, err := c.newReplicaSet(ctx, r, false)
	if err != nil {
		return err
	}
	scaledDown := false
	for _, rs := range activeRSs(old) {
		s, err := c.scale(ctx, r, rs, 0)
		if err != nil {
			return err
		}
		scaledDown = scaledDown || s
	}
	if scaledDown || !r.fresh || c.oldPodsRunning(old) {
		return c.syncStatus(ctx, r, newRS, old)
	}
	if newRS == nil {
		if newRS, old, err = c.newReplicaSet(ctx, r, true); err != nil {
			return err
		}
	}
	if _, err := c.scale(ctx, r, newRS, desired(r.d)); err != nil {
		return err
	}
	if complete(r.d, &r.d.Status) {
		if err := c.cleanup(ctx, r, old); err != nil {
			return err
		}
	}
	return c.syncStatus(ctx, r, newRS, old)
}

// oldPodsRunning: an old ReplicaSet still reports pods, or one of its pods (even terminating)
// still exists and has not finished.
func (c *controller) oldPodsRunning(old []*appsv1.ReplicaSet) bool {
	for _, rs := range old {
		if rs.Status.Replicas > 0 {
			return true
		}
		for _, p := range controllerkit.Pods(c.pods.ByIndex(informer.IndexControllerUID, string(rs.UID))) {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				return true
			}
		}
	}
	return false
}
