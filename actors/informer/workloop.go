package informer

import (
	"context"
	"sync"

	"k8s.io/client-go/util/workqueue"

	"github.com/skiff-sh/skiff/actors/actorkit"
)

// WorkLoop is an actor fed by informers that works through a queue of keys (the proxy, the
// NetworkPolicy enforcer). Each incarnation subscribes to Handlers' informers, gives their
// events to the handlers, and runs Run on a goroutine the actor supervises; a restart or stop
// unsubscribes, shuts the queue down and waits for Run and every goroutine of Incarnation.Go
// before Stop lets go of what the incarnation held. It lives here, not in actorkit, because it
// subscribes to informers.
type WorkLoop struct {
	Name     string // the work goroutine's name
	Fault    string // the event-handler fault point (actorkit.InjectPanic)
	Handlers map[*Informer]Handler
	Cleanup  bool // given to Stop when the actor stops for good (never on a restart)
	// Start prepares an incarnation before its events and work begin (publishing its queue);
	// optional.
	Start func(in *Incarnation)
	// Run is the incarnation's work, until ctx ends (usually actorkit.Drain of in.Queue).
	Run func(ctx context.Context, in *Incarnation)
	// Stop ends an incarnation that started, once its goroutines returned.
	Stop func(cleanup bool)

	in   *Incarnation
	subs Subscriptions
}

// Incarnation is one run of a WorkLoop.
type Incarnation struct {
	Queue  workqueue.TypedRateLimitingInterface[string] // the handlers add keys, Run drains them
	Sys    *actorkit.System
	Self   *actorkit.PID
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Go runs fn beside Run on a goroutine the actor supervises; fn's ctx ends with the
// incarnation, which waits for fn before Stop.
func (in *Incarnation) Go(name string, fn func(ctx context.Context)) {
	in.wg.Add(1)
	in.Sys.GoFrom(in.Self, name, func(context.Context) { defer in.wg.Done(); fn(in.ctx) })
}

// Receive implements actorkit.Actor.
func (w *WorkLoop) Receive(ctx actorkit.Context) {
	switch m := ctx.Message().(type) {
	case *Event:
		if h, ok := w.subs.Handler(m); ok {
			actorkit.Fault(w.Fault)
			m.To(h)
		}
	case *actorkit.Started:
		w.start(ctx)
	case *actorkit.Restarting:
		w.stop(false)
	case *actorkit.Stopping:
		w.stop(w.Cleanup)
	}
}

func (w *WorkLoop) start(actx actorkit.Context) {
	in := &Incarnation{Queue: actorkit.NewKeyQueue(), Sys: actorkit.SystemOf(actx), Self: actx.Self()}
	in.ctx, in.cancel = context.WithCancel(context.Background())
	w.in = in
	if w.Start != nil {
		w.Start(in)
	}
	for inf, h := range w.Handlers {
		w.subs.Add(in.Sys, in.Self, inf, h)
	}
	in.Go(w.Name, func(ctx context.Context) { w.Run(ctx, in) })
}

func (w *WorkLoop) stop(cleanup bool) {
	w.subs.Stop()
	in := w.in
	if in == nil {
		return
	}
	w.in = nil
	in.cancel()
	in.Queue.ShutDown()
	in.wg.Wait()
	w.Stop(cleanup)
}
