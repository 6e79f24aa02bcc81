package kubelet

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Fault points (actorkit.InjectPanic): the kubelet's pod event handler, one pod's sync, one
// probe's result.
func FaultEvent(node string) string { return "kubelet " + node + " event" }
func FaultPodSync(namespace, name string) string {
	return "kubelet sync " + namespace + "/" + name
}
func FaultProbe(namespace, name, container, kind string) string {
	return "kubelet probe " + namespace + "/" + name + " " + container + " " + strings.ToLower(kind)
}

// PodActorName is the name of a pod's actor under the kubelet actor (namespaces and pod names
// hold no "_", so the name is unambiguous).
func PodActorName(namespace, name string) string { return namespace + "_" + name }

// syncRequest asks the kubelet actor for a sync of one pod key.
type syncRequest struct {
	key    string
	resync bool
}

// podGone is a pod actor telling the kubelet that its pod is gone and torn down.
type podGone struct {
	key string
	pid *actorkit.PID
}

// kubeletActor is one incarnation of the node agent: it follows the pod informer, keeps a
// child actor per pod of this node and runs the node's loops (heartbeat, housekeeping, runtime
// events). A restart stops the children; the informer's replay spawns them again.
type kubeletActor struct {
	k    *kubelet
	actx actorkit.Context
	subs informer.Subscriptions
	pods map[string]*podChild // by pod key
	keys map[string]string    // child actor id -> pod key
}

type podChild struct {
	pid      *actorkit.PID
	stopping bool // stopped, not yet terminated
	again    bool // a sync was asked for while stopping: spawn it again once terminated
}

func (a *kubeletActor) Receive(ctx actorkit.Context) {
	switch m := ctx.Message().(type) {
	case *actorkit.Started:
		a.start(ctx)
	case *actorkit.Stopping, *actorkit.Restarting:
		a.subs.Stop()
	case *informer.Event:
		h, ok := a.subs.Handler(m)
		if !ok {
			return // sent to a past incarnation: the replay of the current one covers it
		}
		actorkit.Fault(FaultEvent(a.k.cfg.NodeName))
		m.To(h)
	case *syncRequest:
		a.route(ctx, m.key, m.resync, false)
	case *podGone:
		a.gone(ctx, m)
	case *actorkit.Terminated:
		a.terminated(ctx, m.Who)
	}
}

func (a *kubeletActor) start(actx actorkit.Context) {
	k := a.k
	a.actx, a.pods, a.keys = actx, map[string]*podChild{}, map[string]string{}
	if k.sys == nil { // written once: goroutines read it after loading self
		k.sys = actorkit.SystemOf(actx)
	}
	self := actx.Self()
	k.self.Store(self)
	onPod := func(o runtime.Object) {
		if p := o.(*corev1.Pod); k.observe(p) {
			// A vanished pod is synced too: its sandbox must go.
			a.route(a.actx, controllerkit.KeyOf(p), false, true)
		}
	}
	a.subs.Add(k.sys, self, k.pods, informer.Funcs{Add: onPod, Update: func(_, o runtime.Object) { onPod(o) }, Delete: onPod})
	if k.cfg.PodsViaAPI { // the kubelet's own cache: its watch is this actor's
		actorkit.Go(actx, "pod informer", func(ctx context.Context) { _ = k.pods.Run(ctx) })
	}
	actorkit.Go(actx, "wait for caches", func(ctx context.Context) {
		if !k.pods.WaitForSync(ctx) || !k.nodes.WaitForSync(ctx) {
			return
		}
		for _, loop := range []func(context.Context){k.heartbeat, k.housekeeping, k.watchRuntime} {
			k.sys.GoFrom(self, "loop", loop)
		}
	})
}

// route hands a sync to the pod's actor, spawning it for a pod bound here (or, with event, for
// any pod of this node an informer event named: a deleted one still has a sandbox to remove).
func (a *kubeletActor) route(ctx actorkit.Context, key string, resync, event bool) {
	c := a.pods[key]
	switch {
	case c == nil:
		if event || a.k.boundHere(key) {
			a.spawn(ctx, key)
		}
	case c.stopping:
		c.again = true
	default:
		ctx.Send(c.pid, &syncPod{resync: resync})
	}
}

func (a *kubeletActor) spawn(ctx actorkit.Context, key string) {
	ns, name := controllerkit.SplitKey(key)
	pid, err := actorkit.SpawnChild(ctx, PodActorName(ns, name), func() actorkit.Actor { return &podActor{k: a.k, key: key} })
	if err != nil {
		panic(err) // the supervisor restarts the kubelet, whose replay spawns the pods again
	}
	a.pods[key] = &podChild{pid: pid}
	a.keys[pid.Id] = key
}

// gone stops the actor of a pod that is gone and torn down, unless a pod under that key was
// bound here meanwhile.
func (a *kubeletActor) gone(ctx actorkit.Context, m *podGone) {
	c := a.pods[m.key]
	if c == nil || c.stopping || !c.pid.Equal(m.pid) {
		return
	}
	if a.k.boundHere(m.key) {
		ctx.Send(c.pid, &syncPod{})
		return
	}
	c.stopping = true
	a.k.retries.Forget(m.key)
	a.k.links.Forget(m.key)
	ctx.Stop(c.pid)
}

func (a *kubeletActor) terminated(ctx actorkit.Context, who *actorkit.PID) {
	key, ok := a.keys[who.Id]
	if !ok {
		return
	}
	c := a.pods[key]
	delete(a.keys, who.Id)
	delete(a.pods, key)
	if c != nil && c.again {
		a.route(ctx, key, false, true)
	}
}
