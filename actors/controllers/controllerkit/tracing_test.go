package controllerkit

import (
	"context"
	"testing"

	"github.com/skiff-sh/skiff/internal/tracing/tracingtest"
)

// A key a write enqueued continues the write's trace; the same key enqueued only by a periodic
// resync gets a trace of its own, linked to the write.
func TestResyncStartsALinkedTrace(t *testing.T) {
	exp, tp := tracingtest.InMemory(t)

	c := &Controller{Name: "test", Queue: &Queue{}}
	write, ws := tp.Tracer("test").Start(context.Background(), "write")
	ws.End()

	c.Queue.Add("ns/a")
	_, s := c.startSpan(write, "ns/a")
	s.End()
	c.Queue.Resync(func() { c.Queue.Add("ns/a") })
	_, s = c.startSpan(write, "ns/a")
	s.End()
	c.Queue.Resync(func() { c.Queue.Add("ns/a") })
	c.Queue.Add("ns/a") // a write after the resync: back to continuing it
	_, s = c.startSpan(write, "ns/a")
	s.End()

	spans := exp.GetSpans()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4", len(spans))
	}
	wid := spans[0].SpanContext.TraceID()
	for i, want := range []bool{true, false, true} {
		sp := spans[i+1]
		if got := sp.SpanContext.TraceID() == wid; got != want {
			t.Errorf("reconcile %d: in the write's trace = %v, want %v", i, got, want)
		}
		if !want && (len(sp.Links) != 1 || sp.Links[0].SpanContext.SpanID() != spans[0].SpanContext.SpanID()) {
			t.Errorf("resync reconcile links %v, want the write", sp.Links)
		}
	}
}
