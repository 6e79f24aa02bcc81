// Package controllerkit is what Skiff's controllers share: an actor that runs informers and a
// rate-limited work queue for one controller, expectations, and small object helpers.
package controllerkit

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Controller describes one level-triggered controller. Everything in it outlives actor
// restarts (it lives in the producer's closure); each actor incarnation gets a fresh work
// queue, restarts the informers from their last revision and resyncs every key.
type Controller struct {
	Name      string
	Workers   int // default 2
	Informers []*informer.Informer
	Queue     *Queue
	// Reconcile closes the gap for one key; an error requeues it with backoff.
	Reconcile func(ctx context.Context, key string) error
	// Resync enqueues every primary object. It runs once the caches are synced on every
	// (re)start, and then every ResyncEvery (0 = never again).
	Resync      func()
	ResyncEvery time.Duration
	// Loops run beside the workers (lease renewal, timers) until the incarnation stops.
	Loops []func(ctx context.Context)
	// Receive handles the actor's other messages (commands to this controller); may be nil.
	Receive func(ctx actorkit.Context)
	Logger  *slog.Logger
}

// Producer returns the actor producer to give to actorkit.System.Spawn.
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
	queues.add(c.Name, c.Queue)
	return func() actorkit.Actor { return &controllerActor{c: c} }
}

type controllerActor struct {
	c      *Controller
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (a *controllerActor) Receive(ctx actorkit.Context) {
	switch ctx.Message().(type) {
	case *actorkit.Started:
		a.start(ctx)
	case *actorkit.Stopping, *actorkit.Restarting:
		a.stop()
	case *actorkit.Crash:
		// The test hook, and how a panicking worker hands its failure to the supervisor.
		panic(fmt.Sprintf("controller %s: crash requested", a.c.Name))
	default:
		if a.c.Receive != nil {
			a.c.Receive(ctx)
		}
	}
}

func (a *controllerActor) start(actx actorkit.Context) {
	c := a.c
	run, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	q := c.Queue.renew()
	// A panic in a worker must restart the actor, not kill the process: hand it over.
	sys, self := actx.ActorSystem(), actx.Self()
	crash := func(where string) {
		if r := recover(); r != nil {
			c.Logger.Error("controller panic", "controller", c.Name, "where", where, "panic", r, "stack", string(debug.Stack()))
			sys.Root.Send(self, &actorkit.Crash{})
		}
	}
	for _, inf := range c.Informers {
		a.wg.Add(1)
		go func() { defer a.wg.Done(); _ = inf.Run(run) }()
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for _, inf := range c.Informers {
			if !inf.WaitForSync(run) {
				return
			}
		}
		if c.Resync != nil {
			c.Resync()
		}
		for i := 0; i < c.Workers; i++ {
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				defer crash("worker")
				a.work(run, q)
			}()
		}
		for _, loop := range c.Loops {
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				defer crash("loop")
				loop(run)
			}()
		}
		if c.ResyncEvery <= 0 || c.Resync == nil {
			return
		}
		t := time.NewTicker(c.ResyncEvery)
		defer t.Stop()
		for {
			select {
			case <-run.Done():
				return
			case <-t.C:
				c.Queue.Resync(c.Resync)
			}
		}
	}()
}

func (a *controllerActor) work(ctx context.Context, q rateLimitingQueue) {
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		func() {
			defer q.Done(key)
			start := time.Now()
			rctx, span := a.c.startSpan(ctx, key)
			err := a.c.Reconcile(rctx, key)
			endSpan(span, err)
			observeReconcile(a.c.Name, start, err)
			switch {
			case err == nil:
				q.Forget(key)
			case ctx.Err() != nil:
			default:
				a.c.Logger.Debug("reconcile failed; requeued", "controller", a.c.Name, "key", key, "err", err)
				q.AddRateLimited(key)
			}
		}()
	}
}

func (a *controllerActor) stop() {
	if a.cancel == nil {
		return
	}
	a.cancel()
	a.c.Queue.shutDown()
	a.wg.Wait()
	a.cancel = nil
}
