package endpointslice

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// reportingSync records a Warning on the Service when its slices could not be written, as
// kube-controller-manager does; a conflict or a vanished object only means the cache was
// behind, and the retry settles it without bothering the user.
func (c *controller) reportingSync(ctx context.Context, key string) error {
	err := c.tracedSync(ctx, key)
	if err == nil || ctx.Err() != nil || apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return err
	}
	if o, ok := c.svcs.Get(controllerkit.SplitKey(key)); ok {
		c.rec.Eventf(ctx, o.(*corev1.Service), corev1.EventTypeWarning, "FailedToUpdateEndpointSlices",
			"Error updating Endpoint Slices for Service %s: %v", key, err)
	}
	return err
}
