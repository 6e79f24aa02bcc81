package tracing

import (
	"context"
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/skiff-sh/skiff/internal/spanstore"
)

// Heartbeats that start a trace are kept about once in 1/HeartbeatSampleRate; everything else,
// and every span below a kept one, is kept.
func TestHeartbeatsAreSampledAndTheRestKept(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(newSampler()), sdktrace.WithSpanProcessor(rec))
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

// A trace records its first spanstore.DefaultMaxSpansPerTrace spans and no more; the work
// under a span over budget is dropped with it, and the next trace has a budget of its own.
func TestATraceKeepsNoMoreSpansThanTheStoreHolds(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(newSampler()), sdktrace.WithSpanProcessor(rec))
	tr := tp.Tracer("test")
	ctx, root := tr.Start(context.Background(), "create deployments")
	limit := spanstore.DefaultMaxSpansPerTrace
	overBudget := 0
	for range limit + 50 {
		pctx, pod := tr.Start(ctx, "create pods")
		_, bind := tr.Start(pctx, "create pods/binding")
		if !pod.SpanContext().IsSampled() {
			overBudget++
			if bind.SpanContext().IsSampled() {
				t.Fatal("a span under a dropped one was kept")
			}
		}
		bind.End()
		pod.End()
	}
	root.End()
	if got := len(rec.Ended()); got != limit {
		t.Fatalf("one trace recorded %d spans, want the budget of %d", got, limit)
	}
	if overBudget == 0 {
		t.Fatal("no span was over budget")
	}
	_, next := tr.Start(context.Background(), "create deployments")
	next.End()
	if !next.SpanContext().IsSampled() {
		t.Fatal("a new trace was dropped: each trace has a budget of its own")
	}
}

// The budget remembers a bounded number of traces: past two generations a trace counts afresh.
func TestSpanBudgetForgetsOldTraces(t *testing.T) {
	b := newSpanBudget(2, 3)
	id := func(i byte) trace.TraceID { return trace.TraceID{i} }
	if !b.take(id(1)) || !b.take(id(1)) || b.take(id(1)) {
		t.Fatal("trace 1 should get exactly 2 spans")
	}
	for i := byte(2); i < 9; i++ {
		b.take(id(i))
	}
	if len(b.cur) > 3 || len(b.prev) > 3 {
		t.Fatalf("budget holds %d+%d traces, want at most 3 per generation", len(b.cur), len(b.prev))
	}
	if !b.take(id(1)) {
		t.Fatal("trace 1, unseen for two generations, should count afresh")
	}
	b.take(id(9))
	if b.take(id(9)); b.take(id(9)) {
		t.Fatal("trace 9 should be over budget")
	}
}
