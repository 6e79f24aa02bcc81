// Package actorkit is Skiff's thin wrapper over protoactor-go. The library is pre-1.0, so every
// component depends on this small surface instead of on the library directly.
package actorkit

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Re-exported so components need not import protoactor-go for the basics.
type (
	Actor      = actor.Actor
	Context    = actor.Context
	PID        = actor.PID
	Started    = actor.Started
	Stopping   = actor.Stopping
	Stopped    = actor.Stopped
	Restarting = actor.Restarting
)

// Crash is a test hook every Skiff actor honours: it panics on it, so tests can prove that the
// supervisor restarts the actor and that the actor resumes where it was.
type Crash struct{}

// Restart policy for every component: a panic restarts the actor, and only an actor that fails
// more than 10 times within 10 seconds is stopped for good.
const (
	maxRestarts   = 10
	restartWindow = 10 * time.Second
)

// System is one process's actor system.
type System struct {
	sys        *actor.ActorSystem
	supervised *actor.RootContext
}

// NewSystem creates the process's actor system; its own logging is kept quiet (warnings only).
func NewSystem() *System {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}))
	strategy := actor.NewOneForOneStrategy(maxRestarts, restartWindow, actor.DefaultDecider)
	return &System{sys: sys, supervised: sys.Root.WithGuardian(strategy)}
}

// Spawn starts a named, supervised top-level actor. The producer is called again on every
// restart, so state that must survive a restart lives outside the actor (in the producer's closure).
func (s *System) Spawn(name string, producer func() Actor) (*PID, error) {
	pid, err := s.supervised.SpawnNamed(actor.PropsFromProducer(producer), name)
	if err != nil {
		return nil, fmt.Errorf("spawn %s: %w", name, err)
	}
	return pid, nil
}

// Send delivers a message without waiting for an answer.
func (s *System) Send(pid *PID, msg any) { s.sys.Root.Send(pid, msg) }

// Request sends a message and waits for the actor's Respond.
func (s *System) Request(pid *PID, msg any, timeout time.Duration) (any, error) {
	return s.sys.Root.RequestFuture(pid, msg, timeout).Result()
}

// Stop stops an actor after the messages already in its mailbox, and waits until it has
// stopped. (A poison pill: the library's StopFuture does not complete for guardian-supervised
// actors.)
func (s *System) Stop(pid *PID) {
	_ = s.sys.Root.PoisonFuture(pid).Wait()
}

// Shutdown stops the whole system.
func (s *System) Shutdown() { s.sys.Shutdown() }

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
