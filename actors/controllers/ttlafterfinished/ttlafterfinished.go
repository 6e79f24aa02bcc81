// Package ttlafterfinished is the TTL-after-finished controller, as kube-controller-manager's:
// a Job with spec.ttlSecondsAfterFinished is deleted, with its pods (foreground propagation),
// that many seconds after it completed or failed.
package ttlafterfinished

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Name is the controller's name in logs.
const Name = "ttl-after-finished-controller"

// Config configures the controller.
type Config = controllerkit.Config

type controller struct {
	cfg   Config
	jobs  *informer.Informer
	queue *controllerkit.Queue
	now   func() time.Time
}

// New returns the producer of the controller actor.
func New(cfg Config) func() actorkit.Actor {
	c := &controller{cfg: cfg, jobs: cfg.Informers.For("batch", "jobs"), queue: &controllerkit.Queue{}, now: time.Now}
	enqueue := func(o runtime.Object) {
		if j := o.(*batchv1.Job); j.Spec.TTLSecondsAfterFinished != nil && j.DeletionTimestamp == nil {
			c.queue.Enqueue(j)
		}
	}
	ctl := &controllerkit.Controller{
		Name:    Name,
		Workers: cfg.Workers,
		Watches: []controllerkit.Watch{{Informer: c.jobs, Handler: informer.Funcs{
			Add: enqueue, Update: func(_, o runtime.Object) { enqueue(o) },
		}}},
		Queue:     c.queue,
		Reconcile: c.sync,
		Resync:    controllerkit.ForEach(c.jobs, enqueue),
		Logger:    cfg.Logger,
	}
	return ctl.Producer()
}

func (c *controller) sync(ctx context.Context, key string) error {
	ns, name := controllerkit.SplitKey(key)
	o, ok := c.jobs.Get(ns, name)
	if !ok {
		return nil
	}
	j := o.(*batchv1.Job)
	expireAt, ok := expiry(j)
	if !ok || j.DeletionTimestamp != nil {
		return nil
	}
	if left := expireAt.Sub(c.now()); left > 0 {
		c.queue.AddAfter(key, left)
		return nil
	}
	// The UID precondition: a Job recreated under the same name is not this one.
	uid := j.UID
	policy := metav1.DeletePropagationForeground
	err := c.cfg.Client.Delete(ctx, controllerkit.MustKind("batch", "jobs"), ns, name,
		&metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// expiry is when a finished Job with a TTL is due: its Complete or Failed condition's time
// plus the TTL.
func expiry(j *batchv1.Job) (time.Time, bool) {
	if j.Spec.TTLSecondsAfterFinished == nil {
		return time.Time{}, false
	}
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Add(time.Duration(*j.Spec.TTLSecondsAfterFinished) * time.Second), true
		}
	}
	return time.Time{}, false
}
