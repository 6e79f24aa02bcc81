// Package scheduler is the scheduler actor: it follows pods and nodes on the process's shared
// informers, picks a node for each pending pod with the framework's plugins, and binds through
// the apiserver's binding subresource (a compare-and-swap, so a pod is never bound twice).
//
// Informer events arrive as messages in the actor's mailbox; handling one costs a cache
// update and, for a change that may make waiting pods fit, the queueing hints of the pods in
// the unschedulable pool, never a walk over all pods. The scheduling loop and the binders are
// goroutines of the actor, so a panic anywhere restarts the scheduler, not the process.
package scheduler

import (
	"context"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/events"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/actors/scheduler/framework"
	"github.com/skiff-sh/skiff/actors/scheduler/queue"
)

// Name is the schedulerName this scheduler serves.
const Name = "default-scheduler"

// FaultEvent is the fault point (actorkit.InjectPanic) at the start of the actor's informer
// event handler.
const FaultEvent = "scheduler event"

// Config configures the scheduler actor.
type Config struct {
	Informers *informer.Factory // the process's shared informers (required); their actor runs them
	Client    *apiclient.Client
	Binders   int // concurrent binds (and status writes) in flight; default 256
	// EventQPS and EventBurst bound the Events written per second, as kube-scheduler's event
	// client is bound by its client connection's QPS and burst (defaults 50 and 100): beyond
	// them Events wait in the backlog, and are dropped when it is full.
	EventQPS   float32
	EventBurst int
	Options    framework.Options
	OnBind     func(pod, node string) // test hook, may be nil
}

// state outlives actor restarts.
type state struct {
	cfg      Config
	pods     informer.Typed[*corev1.Pod]
	nodes    informer.Typed[*corev1.Node]
	vols     *volumeState
	recorder *events.Recorder
	// eventLimit spans incarnations: a restart must not refill the bucket.
	eventLimit flowcontrol.RateLimiter
}

// NewActor returns the producer of the scheduler actor.
func NewActor(cfg Config) func() actorkit.Actor {
	if cfg.Informers == nil {
		panic("scheduler: Config.Informers is required")
	}
	if cfg.Binders == 0 {
		cfg.Binders = 256
	}
	if cfg.EventQPS == 0 {
		cfg.EventQPS = 50
	}
	if cfg.EventBurst == 0 {
		cfg.EventBurst = 100
	}
	st := &state{cfg: cfg, recorder: events.New(cfg.Client, Name, ""),
		eventLimit: flowcontrol.NewTokenBucketRateLimiter(cfg.EventQPS, cfg.EventBurst),
		pods:       informer.Shared[*corev1.Pod](cfg.Informers, "", "pods"),
		nodes:      informer.Shared[*corev1.Node](cfg.Informers, "", "nodes"),
		vols:       newVolumeState(cfg.Informers)}
	st.cfg.Options.Volumes = st.vols.podVolumes
	return func() actorkit.Actor { return &schedulerActor{st: st} }
}

// schedulerActor is one incarnation, with its own subscriptions, cache and queue: each
// incarnation subscribes to the informers, whose replay of their caches as adds fills the
// cache and queue afresh, so nothing a failed incarnation left half-updated (nor the event it
// failed on, which is lost) is trusted. That replay, once per start, is the only walk over
// all pods.
type schedulerActor struct {
	st     *state
	subs   []*informer.Subscription
	cache  *framework.Cache
	queue  *queue.Queue
	jobs   chan func() // binds and status writes, run by the binders
	events chan func() // Event writes: best-effort, never in a bind's way
	waits  *volumeWaits
}

// cachesSynced: the informers have their first snapshot, and every object in it has been
// handled (its events were sent before this message).
type cachesSynced struct{ by *schedulerActor }

func (a *schedulerActor) Receive(ctx actorkit.Context) {
	switch m := ctx.Message().(type) {
	case *actorkit.Started:
		a.start(ctx)
	case *informer.Event:
		a.handle(m)
	case *cachesSynced:
		if m.by == a { // not a past incarnation's
			a.run(ctx)
		}
	case *actorkit.Stopping, *actorkit.Restarting:
		for _, s := range a.subs {
			s.Stop()
		}
		a.subs = nil
		a.queue.ShutDown() // ends the scheduling loop's Get
	}
}

func (a *schedulerActor) start(ctx actorkit.Context) {
	st := a.st
	a.cache = framework.NewCache()
	a.queue = queue.New(queue.Options{})
	a.jobs = make(chan func())
	a.events = make(chan func(), eventBacklog)
	a.waits = newVolumeWaits()
	sys, self := actorkit.SystemOf(ctx), ctx.Self()
	a.subs = []*informer.Subscription{
		informer.Subscribe(sys, self, st.nodes.Informer()),
		informer.Subscribe(sys, self, st.pods.Informer()),
		informer.Subscribe(sys, self, st.vols.claims.Informer()),
		informer.Subscribe(sys, self, st.vols.volumes.Informer()),
	}
	actorkit.Go(ctx, "wait for caches", func(run context.Context) {
		if st.nodes.WaitForSync(run) && st.pods.WaitForSync(run) && st.vols.claims.WaitForSync(run) &&
			st.vols.volumes.WaitForSync(run) && st.vols.classes.WaitForSync(run) {
			sys.Send(self, &cachesSynced{by: a})
		}
	})
}

// run starts the scheduling loop, the binders and the pool's timeout sweep, once the cache
// holds what the informers held at sync.
func (a *schedulerActor) run(ctx actorkit.Context) {
	actorkit.Go(ctx, "scheduling loop", a.loop)
	for range a.st.cfg.Binders {
		actorkit.Go(ctx, "binder", func(run context.Context) { a.drain(run, a.jobs) })
	}
	actorkit.Go(ctx, "volume waits", a.bindWaiting)
	for range eventWriters {
		actorkit.Go(ctx, "event writer", func(run context.Context) { a.drain(run, a.events) })
	}
	actorkit.Go(ctx, "unschedulable timeout", func(run context.Context) {
		t := time.NewTicker(queue.FlushInterval)
		defer t.Stop()
		for {
			select {
			case <-run.Done():
				return
			case <-t.C:
				a.queue.FlushLeftover()
			}
		}
	})
}

func (a *schedulerActor) handle(ev *informer.Event) {
	if !slices.Contains(a.subs, ev.Sub) {
		return // sent to a past incarnation: the replay to this one covers it
	}
	actorkit.Fault(FaultEvent)
	switch obj := ev.Obj.(type) {
	case *corev1.Node:
		old, _ := ev.Old.(*corev1.Node)
		countEvent("nodes", ev.Type)
		a.onNode(ev.Type, old, obj)
	case *corev1.Pod:
		old, _ := ev.Old.(*corev1.Pod)
		countEvent("pods", ev.Type)
		a.onPod(ev.Type, old, obj)
	case *corev1.PersistentVolumeClaim:
		countEvent("persistentvolumeclaims", ev.Type)
		a.onVolumeObject(ev.Type)
		a.waits.claimChanged(obj.Namespace+"/"+obj.Name, a.st.vols.claimsBound)
	case *corev1.PersistentVolume:
		countEvent("persistentvolumes", ev.Type)
		a.onVolumeObject(ev.Type)
		if r := obj.Spec.ClaimRef; r != nil {
			a.waits.claimChanged(r.Namespace+"/"+r.Name, a.st.vols.claimsBound)
		}
	}
}

func (a *schedulerActor) onNode(t informer.EventType, old, n *corev1.Node) {
	ev := framework.ClusterEvent{Resource: framework.ResourceNode, Node: n}
	switch t {
	case informer.Added:
		ev.Action = framework.Add
		a.cache.UpsertNode(n)
	case informer.Updated:
		ev.Action, ev.OldNode = framework.NodeChange(old, n), old
		if ev.Action == 0 {
			return // a heartbeat: nothing the plugins read changed, in the cache or for a hint
		}
		a.cache.UpsertNode(n)
	case informer.Deleted:
		ev.Action = framework.Delete
		a.cache.DeleteNode(n.Name)
	}
	a.queue.OnEvent(&ev)
}

func (a *schedulerActor) onPod(t informer.EventType, old, p *corev1.Pod) {
	k := key(p)
	if t == informer.Deleted {
		old, p = p, nil
	}
	switch {
	case p == nil: // deleted
		if old.Spec.NodeName != "" {
			a.cache.RemovePod(old)
		} else {
			a.dropWait(k)
			a.queue.Remove(k)
		}
	case p.Spec.NodeName != "" && (old == nil || old.Spec.NodeName == ""):
		a.cache.AddPod(p) // confirms an assumption, or counts a pod bound elsewhere
		a.queue.Remove(k)
	case p.Spec.NodeName != "":
		a.cache.UpdatePod(old, p)
	case !ours(p):
	case p.DeletionTimestamp != nil:
		a.queue.Remove(k)
	case old == nil:
		a.queue.Add(k)
	case specChanged(old, p):
		a.queue.Updated(k)
	}
	for _, ev := range framework.AssignedPodEvents(old, p) {
		a.queue.OnEvent(&ev)
	}
}

// specChanged: a pending pod changed in more than its status (its own PodScheduled condition
// write, say), so it may fit now where it did not.
func specChanged(old, p *corev1.Pod) bool {
	return !maps.Equal(old.Labels, p.Labels) || !equality.Semantic.DeepEqual(old.Spec, p.Spec)
}

// pending: a pod this scheduler should place.
func pending(p *corev1.Pod) bool {
	return p.Spec.NodeName == "" && p.DeletionTimestamp == nil && ours(p)
}

// ours: pods for this scheduler (an empty name is defaulted to it by the apiserver).
func ours(p *corev1.Pod) bool { return p.Spec.SchedulerName == Name || p.Spec.SchedulerName == "" }

func key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func splitKey(key string) (string, string) {
	for i := range key {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}
