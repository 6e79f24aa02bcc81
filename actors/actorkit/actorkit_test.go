package actorkit_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/actors/actorkit"
)

// counter counts its incarnations and runs one goroutine that panics when told to.
type counter struct {
	starts *atomic.Int32
	panics chan struct{}
	alive  *atomic.Int32 // goroutines of live incarnations
}

type ping struct{}

type spawnChild struct {
	producer func() actorkit.Actor
	out      chan *actorkit.PID
}

func (c *counter) Receive(ctx actorkit.Context) {
	switch m := ctx.Message().(type) {
	case *spawnChild:
		pid, err := actorkit.SpawnChild(ctx, "child", m.producer)
		if err != nil {
			panic(err)
		}
		m.out <- pid
	case *actorkit.Started:
		c.starts.Add(1)
		actorkit.Go(ctx, "loop", func(run context.Context) {
			c.alive.Add(1)
			defer c.alive.Add(-1)
			select {
			case <-run.Done():
			case <-c.panics:
				panic("boom")
			}
		})
	case *ping:
		ctx.Respond("pong")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newCounter() (*atomic.Int32, *atomic.Int32, chan struct{}, func() actorkit.Actor) {
	starts, alive := &atomic.Int32{}, &atomic.Int32{}
	panics := make(chan struct{})
	return starts, alive, panics, func() actorkit.Actor { return &counter{starts: starts, panics: panics, alive: alive} }
}

// A panic in a goroutine the actor started restarts that actor (not the process), and the old
// incarnation's goroutine has ended before the new one starts its own.
func TestGoroutinePanicRestartsTheActor(t *testing.T) {
	sys := actorkit.NewSystem()
	defer sys.Shutdown()
	starts, alive, panics, producer := newCounter()
	pid, err := sys.Spawn("counter", producer)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "first start", func() bool { return starts.Load() == 1 && alive.Load() == 1 })
	panics <- struct{}{}
	waitFor(t, "restart", func() bool { return starts.Load() == 2 && alive.Load() == 1 })
	if got, err := sys.Request(pid, &ping{}, 5*time.Second); err != nil || got != "pong" {
		t.Fatalf("after restart: %v %v", got, err)
	}
	if err := sys.Health().Check(); err != nil {
		t.Fatalf("healthy actor reported: %v", err)
	}
}

// An actor that keeps failing is stopped for good: Health names it and the hook is told.
func TestCrashLoopStopsForGoodAndTurnsUnhealthy(t *testing.T) {
	sys := actorkit.NewSystem(actorkit.WithPolicy(actorkit.Policy{MaxRestarts: 2, Window: time.Minute, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}))
	defer sys.Shutdown()
	told := make(chan string, 1)
	sys.Health().OnStoppedForGood(func(actor, _ string) { told <- actor })
	parentStarts, _, _, parent := newCounter()
	ppid, err := sys.Spawn("parent", parent)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "parent start", func() bool { return parentStarts.Load() == 1 })
	// A child of the parent, so the failure is handled below the top level.
	_, _, _, child := newCounter()
	pidCh := make(chan *actorkit.PID, 1)
	sys.Send(ppid, &spawnChild{producer: child, out: pidCh})
	cpid := <-pidCh
	for range 3 {
		sys.Send(cpid, &actorkit.Crash{})
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case a := <-told:
		if a != "parent/child" {
			t.Fatalf("stopped for good: %q, want parent/child", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no actor was stopped for good")
	}
	if err := sys.Health().Check(); err == nil || !strings.Contains(err.Error(), "parent/child") {
		t.Fatalf("Health().Check() = %v, want it to name parent/child", err)
	}
	if _, err := sys.Request(ppid, &ping{}, 5*time.Second); err != nil {
		t.Fatalf("the parent should live on: %v", err)
	}
}
