// Package controllerkit is what Skiff's controllers share: the controller actor (informer
// events as messages, reconcile workers as child actors, a rate-limited work queue),
// expectations, and small object helpers.
package controllerkit

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Watch is one informer a controller follows and what it does with each change (typically:
// enqueue the keys the change concerns). Handlers run in the controller's actor, one message
// at a time, so they need no locks of their own and a panic in one restarts the controller.
type Watch struct {
	Informer *informer.Informer
	Handler  informer.Handler
}

// Controller describes one level-triggered controller. Everything in it outlives actor
// restarts (it lives in the producer's closure); each incarnation gets a fresh work queue,
// subscribes to its informers again (which replays their caches as adds) and resyncs.
type Controller struct {
	Name    string
	Workers int // reconcile workers, each a child actor; default 2
	Watches []Watch
	// WaitFor are informers the controller reads without watching them: reconciles wait for
	// them (and for every watched informer) to be synced.
	WaitFor []*informer.Informer
	Queue   *Queue
	// Reconcile closes the gap for one key; an error requeues it with backoff.
	Reconcile func(ctx context.Context, key string) error
	// Resync enqueues every primary object. It runs once the caches are synced on every
	// (re)start, and then every ResyncEvery (0 = never again).
	Resync      func()
	ResyncEvery time.Duration
	// TraceParent returns ctx carrying the trace a key's reconcile continues: the key's object's
	// last write. Nil: the key is "namespace/name" of the first watched informer's kind.
	TraceParent func(ctx context.Context, key string) context.Context
	// Loops run beside the workers (lease renewal, timers) until the incarnation stops.
	Loops []func(ctx context.Context)
	// Receive handles the actor's other messages (commands to this controller); may be nil.
	Receive func(ctx actorkit.Context)
	Logger  *slog.Logger

	// The fault points' names, made once: they are checked on every event and reconcile.
	faultEvent, faultReconcile string

	mu      sync.Mutex
	added   []Watch       // by AddWatch, kept for later incarnations
	running *actorkit.PID // the current incarnation, nil while none runs
	sys     *actorkit.System
}

// addWatch asks a running incarnation to subscribe to a watch added by AddWatch.
type addWatch struct{ w Watch }

// AddWatch adds a watch while the controller runs (an informer of a kind that appeared since,
// such as a CustomResourceDefinition's): the current incarnation subscribes to it (its
// informer replays its cache as adds), and every later one too.
func (c *Controller) AddWatch(w Watch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.added = append(c.added, w)
	if c.running != nil {
		c.sys.Send(c.running, &addWatch{w: w})
	}
}

func (c *Controller) watches() []Watch {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(slices.Clip(c.Watches), c.added...)
}

// FaultEvent and FaultReconcile name the controller's fault points (actorkit.InjectPanic).
func FaultEvent(controller string) string     { return "controller " + controller + " event" }
func FaultReconcile(controller string) string { return "controller " + controller + " reconcile" }

// Producer returns the actor producer to give to actorkit.System.Spawn or SpawnChild.
func (c *Controller) Producer() func() actorkit.Actor {
	if c.Workers <= 0 {
		c.Workers = 2
	}
	if c.Queue == nil {
		c.Queue = &Queue{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.faultEvent, c.faultReconcile = FaultEvent(c.Name), FaultReconcile(c.Name)
	queues.add(c.Name, c.Queue)
	return func() actorkit.Actor { return &controllerActor{c: c} }
}

type controllerActor struct {
	c    *Controller
	subs informer.Subscriptions // this incarnation's
}

func (a *controllerActor) Receive(ctx actorkit.Context) {
	switch m := ctx.Message().(type) {
	case *actorkit.Started:
		a.start(ctx)
	case *actorkit.Stopping, *actorkit.Restarting:
		a.stop()
	case *informer.Event:
		a.deliver(m)
	case *addWatch:
		a.subs.Add(actorkit.SystemOf(ctx), ctx.Self(), m.w.Informer, m.w.Handler)
	default:
		if a.c.Receive != nil {
			a.c.Receive(ctx)
		}
	}
}

func (a *controllerActor) deliver(ev *informer.Event) {
	h, ok := a.subs.Handler(ev)
	if !ok {
		return // sent to a past incarnation: the replay of the current one covers it
	}
	actorkit.Fault(a.c.faultEvent)
	ev.To(h)
}

func (a *controllerActor) start(actx actorkit.Context) {
	c := a.c
	q := c.Queue.renew()
	sys, self := actorkit.SystemOf(actx), actx.Self()
	c.mu.Lock()
	c.running, c.sys = self, sys
	watches := append(slices.Clip(c.Watches), c.added...)
	c.mu.Unlock()
	for _, w := range watches {
		a.subs.Add(sys, self, w.Informer, w.Handler)
	}
	synced := make(chan struct{})
	actorkit.Go(actx, "wait for caches", func(ctx context.Context) {
		for _, inf := range c.informers() {
			if !inf.WaitForSync(ctx) {
				return
			}
		}
		close(synced)
		if c.Resync != nil {
			c.Resync()
		}
		for _, loop := range c.Loops {
			sys.GoFrom(self, "loop", loop)
		}
		if c.ResyncEvery <= 0 || c.Resync == nil {
			return
		}
		t := time.NewTicker(c.ResyncEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.Queue.Resync(c.Resync)
			}
		}
	})
	for i := 0; i < c.Workers; i++ {
		w := &worker{c: c, q: q, synced: synced}
		if _, err := actorkit.SpawnChild(actx, fmt.Sprintf("worker-%d", i), func() actorkit.Actor { return w }); err != nil {
			panic(err) // the supervisor retries the controller with back-off
		}
	}
}

func (c *Controller) informers() []*informer.Informer {
	out := append([]*informer.Informer(nil), c.WaitFor...)
	for _, w := range c.watches() {
		out = append(out, w.Informer)
	}
	return out
}

func (a *controllerActor) stop() {
	a.c.mu.Lock()
	a.c.running = nil
	a.c.mu.Unlock()
	a.subs.Stop()
	a.c.Queue.shutDown() // the workers' Get returns; they are stopped with this actor
}

// worker is a reconcile worker: a child actor taking keys from its controller's queue. A
// panic in a reconcile requeues the key (rate limited) and restarts just this worker.
type worker struct {
	c      *Controller
	q      rateLimitingQueue
	synced <-chan struct{}
}

func (w *worker) Receive(actx actorkit.Context) {
	if _, ok := actx.Message().(*actorkit.Started); ok {
		actorkit.Go(actx, "reconcile", w.run)
	}
}

func (w *worker) run(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-w.synced:
	}
	for {
		key, quit := w.q.Get()
		if quit {
			return
		}
		w.reconcile(ctx, key)
	}
}

func (w *worker) reconcile(ctx context.Context, key string) {
	c := w.c
	defer w.q.Done(key)
	defer func() {
		if r := recover(); r != nil {
			w.q.AddRateLimited(key) // level-triggered: the key is retried by the next worker
			panic(r)
		}
	}()
	start := time.Now()
	rctx, span := c.startSpan(ctx, key)
	actorkit.Fault(c.faultReconcile)
	err := c.Reconcile(rctx, key)
	endSpan(span, err)
	observeReconcile(c.Name, start, err)
	switch {
	case err == nil:
		w.q.Forget(key)
	case ctx.Err() != nil:
	default:
		c.Logger.Debug("reconcile failed; requeued", "controller", c.Name, "key", key, "err", err)
		w.q.AddRateLimited(key)
	}
}
