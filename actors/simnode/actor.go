package simnode

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/actors/nodeheartbeat"
)

// fleetActor is one incarnation: its pod queue, its informer handler and every goroutine it
// starts end with it.
type fleetActor struct {
	f     *fleet
	queue workqueue.TypedRateLimitingInterface[string]
	pods  *informer.Subscription // this incarnation's
}

// FaultEvent is the simulated nodes' event-handler fault point (actorkit.InjectPanic).
const FaultEvent = "simnode event"

func (a *fleetActor) podChanged(p *corev1.Pod) {
	if a.f.ours(p.Spec.NodeName) {
		a.queue.Add(controllerkit.KeyOf(p))
	}
}

func (a *fleetActor) Receive(ctx actorkit.Context) {
	switch m := ctx.Message().(type) {
	case *informer.Event:
		if m.Sub == a.pods && m.Type != informer.Deleted {
			actorkit.Fault(FaultEvent)
			a.podChanged(m.Obj.(*corev1.Pod))
		}
	case *actorkit.Started:
		a.start(ctx)
	case *actorkit.Stopping, *actorkit.Restarting:
		// The incarnation's goroutines have ended already (actorkit waits for them first).
		if a.pods != nil {
			a.pods.Stop()
		}
	case *Freeze:
		a.f.setFrozen(m.Node, true)
	case *Thaw:
		a.f.setFrozen(m.Node, false)
		for _, p := range a.f.pods.ByIndex(informer.IndexNodeName, m.Node) {
			a.queue.Add(controllerkit.KeyOf(p))
		}
	}
}

func (a *fleetActor) start(actx actorkit.Context) {
	f := a.f
	if f.ownFactory {
		if _, err := actorkit.SpawnChild(actx, "informers", f.informers.Actor()); err != nil {
			panic(err) // the supervisor retries with back-off
		}
	}
	a.queue = workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, time.Minute))
	q := a.queue
	actorkit.Go(actx, "simnode pod queue", func(ctx context.Context) {
		<-ctx.Done()
		q.ShutDown() // so the workers' Get returns
	})
	for i := 0; i < f.cfg.Workers; i++ {
		actorkit.Go(actx, "simnode pod worker", func(ctx context.Context) { f.work(ctx, q) })
	}
	// A subscription replays every cached pod: this incarnation's resync.
	a.pods = informer.Subscribe(actorkit.SystemOf(actx), actx.Self(), f.pods.Informer())

	beats := make(chan string)
	actorkit.Go(actx, "simnode heartbeat schedule", func(ctx context.Context) {
		// Registering before the node cache is in would try to create every existing node.
		if f.nodes.WaitForSync(ctx) {
			nodeheartbeat.Spread(ctx, f.names, f.cfg.RenewInterval, beats)
		}
	})
	for i := 0; i < f.cfg.HeartbeatWorkers; i++ {
		actorkit.Go(actx, "simnode heartbeat", func(ctx context.Context) {
			for {
				select {
				case <-ctx.Done():
					return
				case name := <-beats:
					f.beat(ctx, name)
				}
			}
		})
	}
}

func (f *fleet) work(ctx context.Context, q workqueue.TypedRateLimitingInterface[string]) {
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		if err := f.syncPod(ctx, key); err != nil && ctx.Err() == nil {
			f.cfg.Logger.Debug("simnode pod", "pod", key, "err", err)
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}
