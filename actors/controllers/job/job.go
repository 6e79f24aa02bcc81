// Package job is the Job controller, as kube-controller-manager's: it runs a Job's pods to
// spec.completions (NonIndexed, or one per index when Indexed) with at most spec.parallelism
// active, retries failures with exponential backoff up to spec.backoffLimit, applies the pod
// failure policy, the active deadline and suspension, and tracks every finished pod with the
// batch.kubernetes.io/job-tracking finalizer so that no pod's result is lost.
package job

import (
	"log/slog"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/events"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Name is the controller's name in Events and logs.
const Name = "job-controller"

// ManagedBy is the spec.managedBy value (or its absence) of the Jobs this controller runs.
const ManagedBy = "kubernetes.io/job-controller"

// Kubernetes' pod failure backoff: 10 s doubling per failure, at most 6 minutes.
const (
	DefaultBackoff    = 10 * time.Second
	DefaultMaxBackoff = 6 * time.Minute
)

// Config configures the controller; zero durations take Kubernetes' values.
type Config struct {
	Informers  *informer.Factory
	Client     *apiclient.Client
	Workers    int
	Logger     *slog.Logger
	Backoff    time.Duration // delay after the first failed pod
	MaxBackoff time.Duration
}

var gvk = batchv1.SchemeGroupVersion.WithKind("Job")

// orphanPrefix marks a queue key that names a pod (not a Job) whose tracking finalizer may be
// left by a Job that is gone.
const orphanPrefix = "pod:"

type controller struct {
	client     *apiclient.Client
	jobs       *informer.Informer
	pods       *informer.Informer
	queue      *controllerkit.Queue
	exp        *controllerkit.Expectations
	removals   *finalizerRemovals
	podCtl     controllerkit.PodControl
	rec        *events.Recorder
	now        func() time.Time
	backoff    time.Duration
	maxBackoff time.Duration
	logger     *slog.Logger

	mu       sync.Mutex
	failures map[string]backoffRecord // by job key; rebuilt from pods after a restart
}

// backoffRecord is what the delay before the next pod depends on: failures since the last
// success and when the latest one happened.
type backoffRecord struct {
	failures    int
	lastFailure time.Time
}

// New returns the producer of the Job controller actor.
func New(cfg Config) func() actorkit.Actor {
	c := &controller{
		client:     cfg.Client,
		jobs:       cfg.Informers.For("batch", "jobs"),
		pods:       controllerkit.IndexOwners(cfg.Informers.For("", "pods")),
		queue:      &controllerkit.Queue{},
		exp:        controllerkit.NewExpectations(),
		removals:   newFinalizerRemovals(),
		rec:        events.New(cfg.Client, Name, ""),
		now:        time.Now,
		backoff:    cfg.Backoff,
		maxBackoff: cfg.MaxBackoff,
		logger:     cfg.Logger,
		failures:   map[string]backoffRecord{},
	}
	if c.backoff <= 0 {
		c.backoff = DefaultBackoff
	}
	if c.maxBackoff <= 0 {
		c.maxBackoff = DefaultMaxBackoff
	}
	c.podCtl = controllerkit.PodControl{Client: cfg.Client, Recorder: c.rec}
	ctl := &controllerkit.Controller{
		Name:    Name,
		Workers: cfg.Workers,
		Watches: []controllerkit.Watch{
			{Informer: c.jobs, Handler: informer.Funcs{
				Add:    func(o runtime.Object) { c.queue.Enqueue(o) },
				Update: func(_, o runtime.Object) { c.queue.Enqueue(o) },
				Delete: func(o runtime.Object) {
					key := controllerkit.KeyOf(o.(*batchv1.Job))
					c.exp.Forget(key)
					c.forgetBackoff(key)
					c.queue.Add(key)
				},
			}},
			{Informer: c.pods, Handler: informer.Funcs{
				Add:    func(o runtime.Object) { c.podChanged(nil, o.(*corev1.Pod)) },
				Update: func(old, o runtime.Object) { c.podChanged(old.(*corev1.Pod), o.(*corev1.Pod)) },
				Delete: func(o runtime.Object) { c.podDeleted(o.(*corev1.Pod)) },
			}},
		},
		Queue:     c.queue,
		Reconcile: c.reconcile,
		Resync:    controllerkit.ForEach(c.jobs, func(o runtime.Object) { c.queue.Enqueue(o) }),
		Logger:    cfg.Logger,
	}
	return ctl.Producer()
}

// owner resolves a pod's controller reference to a Job in the cache (same UID).
func (c *controller) owner(p *corev1.Pod) *batchv1.Job {
	j, _ := controllerkit.Owner[*batchv1.Job](c.jobs, p.Namespace, metav1.GetControllerOfNoCopy(p), gvk.Kind)
	return j
}

func (c *controller) podChanged(old, p *corev1.Pod) {
	c.removals.podSeen(p)
	j := c.owner(p)
	if j == nil {
		if hasTrackingFinalizer(p) {
			c.queue.Add(orphanPrefix + controllerkit.KeyOf(p))
		}
		return
	}
	key := controllerkit.KeyOf(j)
	c.exp.PodChanged(key, old, p)
	c.queue.Add(key)
}

func (c *controller) podDeleted(p *corev1.Pod) {
	c.removals.observed(p.UID)
	if j := c.owner(p); j != nil {
		key := controllerkit.KeyOf(j)
		c.exp.DeletionObserved(key, controllerkit.KeyOf(p))
		c.queue.Add(key)
	}
}

func (c *controller) forgetBackoff(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.failures, key)
}

func hasTrackingFinalizer(p *corev1.Pod) bool {
	for _, f := range p.Finalizers {
		if f == batchv1.JobTrackingFinalizer {
			return true
		}
	}
	return false
}

func isOrphanKey(key string) (string, bool) { return strings.CutPrefix(key, orphanPrefix) }
