package tracestream

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/internal/spanstore"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

type replica struct {
	store *spanstore.Store
	pid   *actorkit.PID
	tp    *sdktrace.TracerProvider
}

func startReplica(t *testing.T, sys *actorkit.System, srv *natsserver.Server, name string) *replica {
	t.Helper()
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r := &replica{store: spanstore.New(spanstore.Options{})}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.store))
	if r.pid, err = sys.Spawn(name, NewActor(Config{Conn: nc, Store: r.store})); err != nil {
		t.Fatal(err)
	}
	return r
}

// trace makes one user write's trace in r's process and returns its id.
func (r *replica) trace(name string) string {
	_, s := r.tp.Tracer("skiff/apiserver").Start(context.Background(), "create deployments")
	id := s.SpanContext().TraceID().String()
	s.End()
	return id
}

func waitForTrace(t *testing.T, st *spanstore.Store, id string, spans int) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		if got := len(st.Trace(id)); got != spans {
			return fmt.Errorf("trace %s has %d spans here, want %d", id, got, spans)
		}
		return nil
	})
}

// Two apiserver replicas serve the same traces, a restarted actor neither loses nor doubles
// them, and a restarted server (same data dir) still has them.
func TestReplicasShareTracesThatOutliveRestarts(t *testing.T) {
	dir := t.TempDir()
	srv, err := natsserver.Start(natsserver.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	sys := actorkit.NewSystem()
	a, b := startReplica(t, sys, srv, "a"), startReplica(t, sys, srv, "b")

	first := a.trace("first")
	waitForTrace(t, b.store, first, 1)
	waitForTrace(t, a.store, first, 1)

	// A crash of a's actor: it resumes after what it applied, so nothing arrives twice.
	sys.Send(a.pid, &actorkit.Crash{})
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		if sys.Health().Restarts(a.pid.Id) == 0 {
			return fmt.Errorf("not restarted yet")
		}
		return nil
	})
	second := b.trace("second")
	waitForTrace(t, a.store, second, 1)
	third := a.trace("third")
	waitForTrace(t, b.store, third, 1)
	if _, spans := a.store.Len(); spans != 3 {
		t.Fatalf("a holds %d spans after its restart, want 3", spans)
	}

	sys.Shutdown()
	srv.Shutdown()
	srv, err = natsserver.Start(natsserver.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	sys = actorkit.NewSystem()
	defer sys.Shutdown()
	c := startReplica(t, sys, srv, "c")
	for _, id := range []string{first, second, third} {
		waitForTrace(t, c.store, id, 1)
	}
}
