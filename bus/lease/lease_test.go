package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/skiff-sh/skiff/bus/natsserver"
)

type candidate struct {
	name    string
	nc      *nats.Conn
	started chan time.Time
	stopped chan time.Time
	cancel  context.CancelFunc
	done    chan error
}

func startCandidate(t *testing.T, srv *natsserver.Server, id string, ttl time.Duration, active *atomic.Int32, overlap *atomic.Bool) *candidate {
	t.Helper()
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	el, err := New(ctx, nc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := &candidate{name: id, nc: nc, started: make(chan time.Time, 8), stopped: make(chan time.Time, 8), cancel: cancel, done: make(chan error, 1)}
	go func() {
		c.done <- el.Run(ctx, "scheduler", id, ttl, func(lctx context.Context) {
			if active.Add(1) > 1 {
				overlap.Store(true)
			}
			c.started <- time.Now()
			<-lctx.Done()
			active.Add(-1)
		}, func() { c.stopped <- time.Now() })
	}()
	return c
}

func recv(t *testing.T, ch chan time.Time, what string) time.Time {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	return time.Time{}
}

func TestKilledLeaderIsReplacedOnceItsLeaseExpires(t *testing.T) {
	srv, err := natsserver.Start(natsserver.Config{DataDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	const ttl = time.Second
	var active atomic.Int32
	var overlap atomic.Bool
	a := startCandidate(t, srv, "a", ttl, &active, &overlap)
	recv(t, a.started, "a to lead")
	b := startCandidate(t, srv, "b", ttl, &active, &overlap)

	// a keeps the lease across several renewals while b waits.
	select {
	case <-b.started:
		t.Fatal("b took over from a live leader")
	case <-time.After(2 * ttl):
	}

	// Kill a's connection: it can no longer renew.
	killed := time.Now()
	a.nc.Close()
	steppedDown := recv(t, a.stopped, "a to step down")
	started := recv(t, b.started, "b to take over")
	took := started.Sub(killed)
	t.Logf("takeover %v after the leader died (ttl %v)", took, ttl)
	// Safety is ordered by events: a stepped down before b led, and b waited for the
	// record to stand still (a's last renewal was at most a renew interval before the kill).
	// Lateness is load, not a fault: recv's deadline bounds it.
	if started.Before(steppedDown) {
		t.Fatalf("b led at %v, before a stepped down at %v", started, steppedDown)
	}
	if took < ttl/2 {
		t.Fatalf("takeover after %v, before the lease (%v) could have expired", took, ttl)
	}
	if err := <-a.done; !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("killed elector returned %v", err)
	}

	// A leader that shuts down cleanly releases: c takes over well inside a ttl.
	c := startCandidate(t, srv, "c", ttl, &active, &overlap)
	released := time.Now()
	b.cancel()
	recv(t, b.stopped, "b to stop")
	// A released lease is taken at once, not on expiry: c leads before b's ttl could have run out.
	if got := recv(t, c.started, "c to take over").Sub(released); got >= ttl {
		t.Fatalf("takeover after release took %v: c waited for the lease to expire", got)
	}
	if err := <-b.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled elector returned %v", err)
	}
	if overlap.Load() {
		t.Fatal("two leaders at once")
	}
}
