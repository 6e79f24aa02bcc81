package statelog

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/skiff-sh/skiff/bus/natsserver"
)

// env is a real embedded JetStream server on a per-test data dir.
type env struct {
	t   testing.TB
	dir string
	srv *natsserver.Server
	nc  *nats.Conn
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	e.start()
	t.Cleanup(e.stop)
	return e
}

func (e *env) start() {
	e.t.Helper()
	srv, err := natsserver.Start(natsserver.Config{DataDir: e.dir})
	if err != nil {
		e.t.Fatal(err)
	}
	nc, err := srv.Connect()
	if err != nil {
		e.t.Fatal(err)
	}
	e.srv, e.nc = srv, nc
}

func (e *env) stop() {
	if e.srv == nil {
		return
	}
	e.nc.Close()
	e.srv.Shutdown()
	e.srv = nil
}

func (e *env) restart() { e.stop(); e.start() }

func (e *env) open(cfg Config) *Log {
	e.t.Helper()
	l, err := Open(ctx(e.t), e.nc, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { l.Close() })
	return l
}

func ctx(t testing.TB) context.Context { return ctxWithin(t, 20*time.Second) }

func ctxWithin(t testing.TB, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

// next waits (with a deadline) for the watcher's next event.
func next(t testing.TB, w *Watcher) Event {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatalf("watch closed: %v", w.Err())
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return Event{}
}

// nextNonBookmark skips bookmarks.
func nextNonBookmark(t testing.TB, w *Watcher) Event {
	t.Helper()
	for {
		if ev := next(t, w); ev.Type != EventBookmark {
			return ev
		}
	}
}

// waitClosed drains the watcher until its channel closes (with a deadline).
func waitClosed(t testing.TB, w *Watcher) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-w.Events():
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("watch not closed within 10s")
		}
	}
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func contextWithCancel(c context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(c)
}
