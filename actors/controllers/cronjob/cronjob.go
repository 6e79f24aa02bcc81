// Package cronjob is the CronJob controller, as kube-controller-manager's: it creates a Job
// named <cronjob>-<scheduled minute> from spec.jobTemplate at each time of spec.schedule (in
// spec.timeZone), within spec.startingDeadlineSeconds, following spec.concurrencyPolicy, and
// keeps spec.successfulJobsHistoryLimit / failedJobsHistoryLimit finished Jobs.
package cronjob

import (
	"log/slog"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/events"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Name is the controller's name in Events and logs.
const Name = "cronjob-controller"

// Config configures the controller.
type Config struct {
	Informers *informer.Factory
	Client    *apiclient.Client
	Workers   int
	Logger    *slog.Logger
	// Clock tells the time and wakes a CronJob at its next schedule (default: the real one);
	// tests pass a fake clock and step it instead of waiting for minutes.
	Clock clock.WithDelayedExecution
}

var gvk = batchv1.SchemeGroupVersion.WithKind("CronJob")

type controller struct {
	client *apiclient.Client
	cjs    *informer.Informer
	jobs   *informer.Informer
	queue  *controllerkit.Queue
	rec    *events.Recorder
	clock  clock.WithDelayedExecution

	mu     sync.Mutex
	timers map[string]clock.Timer // the wake-up at each CronJob's next schedule
}

// New returns the producer of the CronJob controller actor.
func New(cfg Config) func() actorkit.Actor {
	c := &controller{
		client: cfg.Client,
		cjs:    cfg.Informers.For("batch", "cronjobs"),
		jobs:   controllerkit.IndexOwners(cfg.Informers.For("batch", "jobs")),
		queue:  &controllerkit.Queue{},
		rec:    events.New(cfg.Client, Name, ""),
		clock:  cfg.Clock,
		timers: map[string]clock.Timer{},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	ctl := &controllerkit.Controller{
		Name:    Name,
		Workers: cfg.Workers,
		Watches: []controllerkit.Watch{
			{Informer: c.cjs, Handler: informer.Funcs{
				Add:    func(o runtime.Object) { c.queue.Enqueue(o) },
				Update: func(_, o runtime.Object) { c.queue.Enqueue(o) },
				Delete: func(o runtime.Object) { c.stopTimer(controllerkit.KeyOf(o.(*batchv1.CronJob))) },
			}},
			{Informer: c.jobs, Handler: controllerkit.OnChange(func(o runtime.Object) { c.enqueueOwner(o.(*batchv1.Job)) })},
		},
		Queue:     c.queue,
		Reconcile: c.sync,
		Resync:    controllerkit.ForEach(c.cjs, func(o runtime.Object) { c.queue.Enqueue(o) }),
		Logger:    cfg.Logger,
	}
	return ctl.Producer()
}

func (c *controller) enqueueOwner(j *batchv1.Job) {
	if cj, ok := controllerkit.Owner[*batchv1.CronJob](c.cjs, j.Namespace, metav1.GetControllerOfNoCopy(j), gvk.Kind); ok {
		c.queue.Enqueue(cj)
	}
}

// wakeAt enqueues key at t on the controller's clock, replacing the previous wake-up.
func (c *controller) wakeAt(key string, t time.Time) {
	d := t.Sub(c.clock.Now())
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.timers[key]; old != nil {
		old.Stop()
	}
	if d <= 0 {
		// Due already (the clock moved on while the sync ran): enqueued now, not on a timer,
		// which a test's fake clock would fire only when it is stepped again.
		delete(c.timers, key)
		c.queue.Add(key)
		return
	}
	c.timers[key] = c.clock.AfterFunc(d, func() { c.queue.Add(key) })
}

func (c *controller) stopTimer(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.timers[key]; t != nil {
		t.Stop()
		delete(c.timers, key)
	}
}
