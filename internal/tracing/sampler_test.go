package tracing

import (
	"context"
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Heartbeats that start a trace are kept about once in 1/HeartbeatSampleRate; everything else,
// and every span below a kept one, is kept.
func TestHeartbeatsAreSampledAndTheRestKept(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(newHeartbeatSampler()), sdktrace.WithSpanProcessor(rec))
	tr := tp.Tracer("test")
	const n = 5000
	for i := range n {
		name := []string{"update leases", "patch nodes/status", "update nodes/status"}[i%3]
		ctx, s := tr.Start(context.Background(), name)
		_, child := tr.Start(ctx, "write")
		child.End()
		s.End()
	}
	kept, children := 0, 0
	for _, s := range rec.Ended() {
		if s.Name() == "write" {
			children++
		} else {
			kept++
		}
	}
	if want := n * HeartbeatSampleRate; float64(kept) < want/3 || float64(kept) > want*3 {
		t.Fatalf("kept %d of %d heartbeat traces, want about %v", kept, n, want)
	}
	if children != kept {
		t.Fatalf("%d children kept under %d kept heartbeats: a child follows its parent", children, kept)
	}
	for _, name := range []string{"create deployments", "patch deployments", "update pods/status", "get leases", "skiff apply"} {
		before := len(rec.Ended())
		_, s := tr.Start(context.Background(), name)
		s.End()
		if len(rec.Ended()) != before+1 {
			t.Errorf("%q was not kept", name)
		}
	}
	// Under a heartbeat that a caller's trace holds, the caller's decision stands.
	ctx, parent := tr.Start(context.Background(), "reconcile")
	for i := range 20 {
		_, s := tr.Start(ctx, fmt.Sprint("update leases ", i)[:13])
		s.End()
	}
	parent.End()
	if got := len(rec.Ended()); got < kept+children+5+21 {
		t.Fatalf("heartbeat spans inside a kept trace were dropped (%d spans ended)", got)
	}
}
