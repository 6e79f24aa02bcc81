package actorkit

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/skiff-sh/skiff/internal/metrics"
)

var (
	restartsTotal = metrics.Counter("skiff_actor_restarts_total",
		"Actor restarts after a failure (a panic in the actor or in a goroutine it started), by actor path.", "actor")
	stoppedGauge = metrics.Gauge("skiff_actor_stopped_for_good",
		"1 for each actor its supervisor stopped for good after too many failures, by actor path.", "actor")
)

var systems sync.Map // *actor.ActorSystem -> *System

// SystemOf is the System an actor runs in.
func SystemOf(ctx Context) *System {
	s, ok := systems.Load(ctx.ActorSystem())
	if !ok {
		panic("actorkit: context of an actor system actorkit did not create")
	}
	return s.(*System)
}

// supervised wraps every actor: it turns Crash and failed goroutines into panics (so the
// supervisor sees them), and ends the incarnation's goroutines before a restart or stop.
type supervised struct {
	sys   *System
	inner Actor
}

// taskFailed is what a goroutine started with Go sends its actor when it panics.
type taskFailed struct {
	name   string
	reason any
	stack  string
}

func (s *supervised) Receive(ctx Context) {
	switch m := ctx.Message().(type) {
	case *Crash:
		panic(fmt.Sprintf("%s: crash requested by test hook", ctx.Self().Id))
	case *taskFailed:
		s.sys.logger.Error("actor goroutine panicked", "actor", ctx.Self().Id, "goroutine", m.name, "panic", m.reason, "stack", m.stack)
		panic(fmt.Sprintf("%s: goroutine %s panicked: %v", ctx.Self().Id, m.name, m.reason))
	case *Stopping, *Restarting:
		// None of the actor's goroutines outlives its incarnation: they are told to stop, the
		// actor cleans up (shutting the queues they may block on), then they are waited for.
		wait := s.sys.tasks.cancel(ctx.Self())
		s.inner.Receive(ctx)
		wait()
	default:
		s.inner.Receive(ctx)
	}
}

// strategy is the one-for-one supervision of every Skiff actor: restart with back-off, stop
// for good (and record it) past the policy's budget.
type strategy struct{ sys *System }

func (st *strategy) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *PID, rs *actor.RestartStatistics, reason, _ any) {
	p := st.sys.policy
	rs.Fail()
	n := rs.NumberOfFailures(p.Window)
	if n > p.MaxRestarts {
		st.sys.logger.Error("actor stopped for good", "actor", child.Id, "failures", n, "within", p.Window, "reason", reason)
		stoppedGauge.WithLabelValues(child.Id).Set(1)
		st.sys.health.stoppedForGood(child.Id, fmt.Sprint(reason))
		sup.StopChildren(child)
		return
	}
	delay := backoff(p, n)
	st.sys.logger.Warn("actor failed; restarting", "actor", child.Id, "after", delay, "reason", reason)
	restartsTotal.WithLabelValues(child.Id).Inc()
	st.sys.health.restarted(child.Id)
	time.AfterFunc(delay, func() { sup.RestartChildren(child) })
}

func backoff(p Policy, failures int) time.Duration {
	d := float64(p.InitialBackoff) * math.Pow(2, float64(failures-1))
	return time.Duration(min(d, float64(p.MaxBackoff)))
}
