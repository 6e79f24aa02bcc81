// Package actorkit is Skiff's component runtime over protoactor-go (pre-1.0, so every component
// depends on this small surface instead of on the library): supervised actors that restart with
// back-off, goroutines bound to the actor incarnation that started them, child actors, and a
// health registry that names every actor stopped for good.
package actorkit

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"
)

// protoactor's process registry is 1,024 concurrent maps of SHARD_COUNT locked shards each,
// 32 by default: 32,768 Go maps, ~4 MB live in every actor system (a third of `skiff dns`'s
// live heap at 1,000 Services). Its 1,024 buckets already spread the actors' locks, and a PID
// caches its process, so one shard per bucket loses no useful concurrency. Set before any
// registry exists: a map's shard count must not change under it (protoactor makes none at init).
func init() { cmap.SHARD_COUNT = 1 }

// Re-exported so components need not import protoactor-go for the basics.
type (
	Actor      = actor.Actor
	Context    = actor.Context
	PID        = actor.PID
	Started    = actor.Started
	Stopping   = actor.Stopping
	Stopped    = actor.Stopped
	Restarting = actor.Restarting
	Terminated = actor.Terminated
)

// NewPID names an actor by address and path (a child's path is "parent/child").
func NewPID(address, path string) *PID { return actor.NewPID(address, path) }

// Crash is a test hook every Skiff actor honours (the runtime handles it before the actor sees
// it): the actor panics, so tests can prove that its supervisor restarts it and that it resumes.
type Crash struct{}

// Policy is how a supervisor treats a failing child: restart after a back-off that doubles
// from InitialBackoff to MaxBackoff, and stop it for good once it failed more than MaxRestarts
// times within Window.
type Policy struct {
	MaxRestarts    int
	Window         time.Duration
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
}

// DefaultPolicy: a crash loop of more than 5 failures a minute stops the actor for good (and
// turns the process unhealthy); a single panic costs 50 ms.
var DefaultPolicy = Policy{MaxRestarts: 5, Window: time.Minute, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 5 * time.Second}

// Option configures a System.
type Option func(*System)

// WithPolicy sets the supervision policy of every actor in the system.
func WithPolicy(p Policy) Option { return func(s *System) { s.policy = p } }

// WithLogger sets where restarts and permanent stops are logged.
func WithLogger(l *slog.Logger) Option { return func(s *System) { s.logger = l } }

// System is one process's actor system.
type System struct {
	sys      *actor.ActorSystem
	root     *actor.RootContext
	policy   Policy
	logger   *slog.Logger
	health   *Health
	strategy *strategy
	tasks    *taskTable
}

// NewSystem creates the process's actor system; the library's own logging is kept quiet.
func NewSystem(opts ...Option) *System {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelError}))
	}))
	s := &System{sys: sys, policy: DefaultPolicy, logger: slog.Default(), health: newHealth(), tasks: newTaskTable()}
	for _, o := range opts {
		o(s)
	}
	s.strategy = &strategy{sys: s}
	systems.Store(sys, s)
	s.root = sys.Root.WithGuardian(s.strategy)
	return s
}

// Health is the registry of actors stopped for good, for /readyz, /livez and metrics.
func (s *System) Health() *Health { return s.health }

// Spawn starts a named, supervised top-level actor. The producer is called again on every
// restart, so state that must survive a restart lives outside the actor (in the producer's
// closure).
func (s *System) Spawn(name string, producer func() Actor) (*PID, error) {
	pid, err := s.root.SpawnNamed(s.props(producer), name)
	if err != nil {
		return nil, fmt.Errorf("spawn %s: %w", name, err)
	}
	s.health.started(pid.Id)
	return pid, nil
}

// SpawnChild starts a supervised child of the actor whose context this is; its name is the
// parent's path plus "/" + name.
func SpawnChild(ctx Context, name string, producer func() Actor) (*PID, error) {
	s := SystemOf(ctx)
	pid, err := ctx.SpawnNamed(s.props(producer), name)
	if err != nil {
		return nil, fmt.Errorf("spawn %s/%s: %w", ctx.Self().Id, name, err)
	}
	s.health.started(pid.Id)
	return pid, nil
}

func (s *System) props(producer func() Actor) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &supervised{sys: s, inner: producer()} },
		actor.WithSupervisor(s.strategy))
}

// Send delivers a message without waiting for an answer.
func (s *System) Send(pid *PID, msg any) { s.sys.Root.Send(pid, msg) }

// Request sends a message and waits for the actor's Respond.
func (s *System) Request(pid *PID, msg any, timeout time.Duration) (any, error) {
	return s.sys.Root.RequestFuture(pid, msg, timeout).Result()
}

// Stop stops an actor (and its children) after the messages already in its mailbox, and waits
// until it has stopped. (A poison pill: the library's StopFuture does not complete for
// guardian-supervised actors.)
func (s *System) Stop(pid *PID) {
	_ = s.sys.Root.PoisonFuture(pid).Wait()
}

// Shutdown stops the whole system.
func (s *System) Shutdown() {
	systems.Delete(s.sys)
	s.sys.Shutdown()
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
