package kubelet

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// probeSpec is one probe of one running container attempt.
type probeSpec struct {
	kind    string // Startup, Liveness, Readiness
	probe   *corev1.Probe
	pod     *corev1.Pod
	c       *corev1.Container
	ctrID   string
	podIP   string
	started time.Time // the container's start, from which the initial delay counts
	w       *probeWorker
}

// name is the probe actor's name under its pod actor: one per kind and container attempt.
func (s probeSpec) name() string { return strings.ToLower(s.kind) + "-" + s.ctrID }

// ProbeActorName is the name of a container attempt's probe actor under its pod actor.
func ProbeActorName(kind, containerID string) string {
	return probeSpec{kind: kind, ctrID: containerID}.name()
}

// probeRan is a probe run's result, sent by the goroutine that waited for the period and ran it.
type probeRan struct {
	from *probeActor // the incarnation that started the run
	ok   bool
	msg  string
	at   time.Time
}

// probeActor runs one probe every period and records each result in the kubelet's closure
// (probeWorker), so a restarted probe actor goes on from the same counts and results. A
// result change enqueues the pod. The wait and the check run in a goroutine of the actor, one
// run at a time; the result arrives as a message.
type probeActor struct {
	k *kubelet
	s probeSpec
}

func (a *probeActor) Receive(ctx actorkit.Context) {
	switch m := ctx.Message().(type) {
	case *actorkit.Started:
		if !a.decided() {
			a.next(ctx, time.Until(a.s.started.Add(time.Duration(a.s.probe.InitialDelaySeconds)*time.Second)))
		}
	case *probeRan:
		if m.from == a {
			a.ran(ctx, m)
		}
	}
}

func (a *probeActor) decided() bool {
	a.s.w.mu.Lock()
	defer a.s.w.mu.Unlock()
	return a.s.w.decided(a.s.kind)
}

func (a *probeActor) ran(ctx actorkit.Context, m *probeRan) {
	s, k := &a.s, a.k
	actorkit.Fault(FaultProbe(s.pod.Namespace, s.pod.Name, s.c.Name, s.kind))
	changed, done := s.w.record(s.kind, s.probe, m.ok)
	if changed {
		k.traceProbeChange(s.pod, s.kind, s.c.Name, m.ok, m.msg, m.at)
		k.enqueue(controllerkit.KeyOf(s.pod), false)
	}
	if !done {
		a.next(ctx, secondsOr(s.probe.PeriodSeconds, 10))
	}
}

// next runs the probe after d, in a goroutine that ends with this incarnation.
func (a *probeActor) next(actx actorkit.Context, d time.Duration) {
	s, k, self := &a.s, a.k, actx.Self()
	actorkit.Go(actx, "probe", func(ctx context.Context) {
		timer := time.NewTimer(max(d, 0))
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		at := time.Now()
		ok, msg := k.probes.probe(ctx, s.probe, s.c, s.podIP, s.ctrID)
		if ctx.Err() != nil {
			return
		}
		if !ok {
			k.recorder.Eventf(ctx, s.pod, corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", s.kind, msg)
		}
		k.sys.Send(self, &probeRan{from: a, ok: ok, msg: msg, at: at})
	})
}
