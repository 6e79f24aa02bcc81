// Package podautoscaler is the HorizontalPodAutoscaler controller (autoscaling/v2), as
// kube-controller-manager's: every sync period it reads the target's scale subresource
// (Deployment, ReplicaSet, StatefulSet), the pods its selector picks and their usage from
// metrics.k8s.io, proposes a replica count per cpu/memory metric (Utilization of the requests
// or AverageValue, tolerance 0.1), stabilizes and rate-limits it by spec.behavior, writes the
// scale and reports status.currentMetrics and the AbleToScale, ScalingActive and
// ScalingLimited conditions, with Events for each rescale and failure.
package podautoscaler

import (
	"log/slog"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/events"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/schemas"
)

// Name is the controller's name in Events and logs.
const Name = "horizontal-pod-autoscaler"

// Kubernetes' defaults (kube-controller-manager's --horizontal-pod-autoscaler-* flags).
const (
	DefaultSyncPeriod       = 15 * time.Second
	defaultTolerance        = 0.1
	cpuInitializationPeriod = 5 * time.Minute
	initialReadinessDelay   = 30 * time.Second
)

// Config configures the controller.
type Config struct {
	Informers  *informer.Factory
	Client     *apiclient.Client
	Workers    int
	Logger     *slog.Logger
	SyncPeriod time.Duration // how often each HPA is evaluated (15 s)
	// Clock dates recommendations and scale events (default: the real one); tests step a fake.
	Clock clock.PassiveClock
}

// hpaKind is autoscaling/v2's, the version HPAs are stored as.
var hpaKind, _ = schemas.ByResource("autoscaling", "v2", "horizontalpodautoscalers")

type controller struct {
	client *apiclient.Client
	hpas   *informer.Informer
	pods   *informer.Informer
	queue  *controllerkit.Queue
	rec    *events.Recorder
	clock  clock.PassiveClock
	period time.Duration

	mu      sync.Mutex
	history map[string]*history // by HPA key; outlives actor restarts (it is in the closure)
}

// New returns the producer of the HPA controller actor.
func New(cfg Config) func() actorkit.Actor {
	c := &controller{
		client:  cfg.Client,
		hpas:    cfg.Informers.ForKind(hpaKind, ""),
		pods:    cfg.Informers.For("", "pods"),
		queue:   &controllerkit.Queue{},
		rec:     events.New(cfg.Client, Name, ""),
		clock:   cfg.Clock,
		period:  cfg.SyncPeriod,
		history: map[string]*history{},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.period <= 0 {
		c.period = DefaultSyncPeriod
	}
	ctl := &controllerkit.Controller{
		Name:    Name,
		Workers: cfg.Workers,
		Watches: []controllerkit.Watch{{Informer: c.hpas, Handler: informer.Funcs{
			Add:    func(o runtime.Object) { c.queue.Enqueue(o) },
			Update: func(old, o runtime.Object) { c.specChanged(old, o) },
			Delete: func(o runtime.Object) { c.forget(controllerkit.KeyOf(o.(*autoscalingv2.HorizontalPodAutoscaler))) },
		}}},
		WaitFor:   []*informer.Informer{c.pods},
		Queue:     c.queue,
		Reconcile: c.sync,
		Resync:    controllerkit.ForEach(c.hpas, func(o runtime.Object) { c.queue.Enqueue(o) }),
		Logger:    cfg.Logger,
	}
	return ctl.Producer()
}

// specChanged enqueues an HPA whose spec changed; its own status writes wait for the period.
func (c *controller) specChanged(old, o runtime.Object) {
	if old.(*autoscalingv2.HorizontalPodAutoscaler).Generation != o.(*autoscalingv2.HorizontalPodAutoscaler).Generation {
		c.queue.Enqueue(o)
	}
}

func (c *controller) historyOf(key string) *history {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.history[key]
	if h == nil {
		h = &history{}
		c.history[key] = h
	}
	return h
}

func (c *controller) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.history, key)
}
