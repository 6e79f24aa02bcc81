package kubelet

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// syncPod asks a pod actor to sync its pod.
type syncPod struct{ resync bool }

// syncDone is a pod actor's sync goroutine reporting back.
type syncDone struct {
	from *podActor // the incarnation that started it
	out  syncOutcome
	err  error
}

// syncOutcome is what a sync leaves for its pod actor to do.
type syncOutcome struct {
	probes []probeSpec // the probes the pod's running containers want now
	gone   bool        // no pod under the key is bound here, and nothing of one runs
}

// podActor syncs one pod key, one sync at a time: requests that arrive during a sync fold into
// one more. The sync runs in a goroutine of the actor (a panic in it restarts this actor only,
// and the restart syncs again); its probes are child actors. What must survive a restart —
// crash-loop back-off, probe results, retry delays — lives in the kubelet's closure.
type podActor struct {
	k   *kubelet
	key string

	syncing    bool
	pending    bool                     // a sync was asked for since the running one started
	resyncOnly bool                     // and only by periodic resyncs
	probes     map[string]*actorkit.PID // running probe children by name
	stopping   map[string]bool          // probe children stopped, not yet terminated
}

func (a *podActor) Receive(ctx actorkit.Context) {
	switch m := ctx.Message().(type) {
	case *actorkit.Started:
		a.probes, a.stopping = map[string]*actorkit.PID{}, map[string]bool{}
		a.request(ctx, false)
	case *syncPod:
		a.request(ctx, m.resync)
	case *syncDone:
		if m.from == a {
			a.done(ctx, m)
		}
	case *actorkit.Terminated:
		for name := range a.stopping {
			if ctx.Self().Id+"/"+name == m.Who.Id {
				delete(a.stopping, name)
				a.request(ctx, false) // a probe of that name may be wanted again
			}
		}
	}
}

func (a *podActor) request(ctx actorkit.Context, resync bool) {
	if a.pending {
		a.resyncOnly = a.resyncOnly && resync
	} else {
		a.pending, a.resyncOnly = true, resync
	}
	if !a.syncing {
		a.startSync(ctx)
	}
}

func (a *podActor) startSync(actx actorkit.Context) {
	k, key, resync := a.k, a.key, a.resyncOnly
	a.syncing, a.pending = true, false
	if !k.wantsProbes(key) {
		a.setProbes(actx, nil) // a pod being deleted or finished is probed no more
	}
	self := actx.Self()
	actorkit.Go(actx, "sync", func(ctx context.Context) {
		select {
		case k.slots <- struct{}{}:
			defer func() { <-k.slots }()
		case <-ctx.Done():
			return
		}
		if !k.pods.WaitForSync(ctx) || !k.nodes.WaitForSync(ctx) || !k.services.WaitForSync(ctx) {
			return
		}
		ns, name := controllerkit.SplitKey(key)
		actorkit.Fault(FaultPodSync(ns, name))
		out, err := k.tracedSync(ctx, key, resync)
		if ctx.Err() == nil {
			k.sys.Send(self, &syncDone{from: a, out: out, err: err})
		}
	})
}

func (a *podActor) done(ctx actorkit.Context, m *syncDone) {
	k := a.k
	a.syncing = false
	if m.err != nil {
		k.cfg.Logger.Debug("kubelet: pod sync failed; retrying", "node", k.cfg.NodeName, "pod", a.key, "err", m.err)
		k.enqueueAfter(a.key, k.retries.When(a.key))
	} else {
		k.retries.Forget(a.key)
		a.setProbes(ctx, m.out.probes)
	}
	switch {
	case a.pending:
		a.startSync(ctx)
	case m.err == nil && m.out.gone:
		ctx.Send(ctx.Parent(), &podGone{key: a.key, pid: ctx.Self()})
	}
}

// setProbes makes the probe children those of want: it stops the others and spawns the
// missing ones (a name still stopping is spawned once it terminated).
func (a *podActor) setProbes(ctx actorkit.Context, want []probeSpec) {
	keep := map[string]bool{}
	for _, s := range want {
		keep[s.name()] = true
	}
	for name, pid := range a.probes {
		if !keep[name] {
			ctx.Stop(pid)
			delete(a.probes, name)
			a.stopping[name] = true
		}
	}
	for _, s := range want {
		name := s.name()
		if a.probes[name] != nil || a.stopping[name] {
			continue
		}
		s.pod, s.c = s.pod.DeepCopy(), s.c.DeepCopy()
		pid, err := actorkit.SpawnChild(ctx, name, func() actorkit.Actor { return &probeActor{k: a.k, s: s} })
		if err != nil {
			panic(err) // the supervisor restarts this pod actor, whose sync spawns its probes again
		}
		a.probes[name] = pid
	}
}

// wantsProbes reports whether the pod under key is one to probe: bound here, running on.
func (k *kubelet) wantsProbes(key string) bool {
	o, ok := k.pods.Get(controllerkit.SplitKey(key))
	if !ok {
		return false
	}
	p := o.(*corev1.Pod)
	return p.Spec.NodeName == k.cfg.NodeName && p.DeletionTimestamp == nil &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}
