package spanstore

import (
	"context"
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// A user's apply survives any number of heartbeats, status writes and controllers' own work;
// reads go before those.
func TestUsersTracesOutliveHeartbeats(t *testing.T) {
	st := New(Options{MaxTraces: 10})
	web := []string{AttrResource, "deployments", AttrNamespace, "default", AttrName, "web", AttrUser, "admin"}
	st.Add(span("apply", "a", "cli", "create deployments", 0, 5, web...))
	st.Add(span("apply", "b", "a", "reconcile deployment-controller", 6, 9))
	for i := range 50 {
		id := fmt.Sprint("hb", i)
		switch i % 4 {
		case 0: // a node's lease renewal, whoever it authenticates as
			st.Add(span(id, "s", "", "update leases", 10+i, 11+i, AttrResource, "leases", AttrName, "n1", AttrUser, "system:admin"))
		case 1: // a kubelet's status write
			st.Add(span(id, "s", "", "patch pods", 10+i, 11+i, AttrResource, "pods", AttrSubresource, "status", AttrName, "p", AttrUser, "admin"))
		case 2: // a component's write outside any user's trace
			st.Add(span(id, "s", "", "create events", 10+i, 11+i, AttrResource, "events", AttrName, "e", AttrUser, "system:skiff-control-plane"))
		default: // a controller's periodic work
			st.Add(span(id, "s", "", "reconcile nodelifecycle", 10+i, 11+i))
		}
	}
	if st.Trace("apply") == nil {
		t.Fatal("the user's apply was evicted by background traces")
	}
	if got := st.ForObject("deployments", "default", "web"); got != "apply" {
		t.Fatalf("ForObject = %q, want the apply", got)
	}
	if n, _ := st.Len(); n != 10 {
		t.Fatalf("%d traces held, want the bound 10", n)
	}
	// Reads are dropped before background work: the newest background traces stay.
	st.Add(span("read", "r", "", "get pods", 100, 101, AttrResource, "pods", AttrName, "p"))
	st.Add(span("hb-new", "s", "", "update leases", 102, 103, AttrResource, "leases", AttrName, "n1"))
	if st.Trace("read") != nil || st.Trace("hb-new") == nil || st.Trace("apply") == nil {
		t.Fatalf("want the read evicted first, the new heartbeat and the apply kept")
	}
	// Once only users' traces are left, the least recently updated of them goes.
	for i := range 10 {
		st.Add(span(fmt.Sprint("u", i), "s", "", "patch deployments", 200+i, 201+i, web...))
	}
	if st.Trace("apply") != nil {
		t.Fatal("with ten newer user traces the oldest apply should be gone")
	}
}

// A trace whose top-level span arrives late is ranked by it: the CLI's root comes over OTLP
// after its request's server span.
func TestTraceRankRisesWithItsRoot(t *testing.T) {
	st := New(Options{MaxTraces: 2})
	st.Add(span("apply", "b", "a", "reconcile x", 1, 2)) // parent not held yet: top-level work
	st.Add(span("apply", "a", "", RootApply, 0, 3))
	st.Add(span("hb1", "s", "", "update leases", 4, 5, AttrResource, "leases", AttrName, "n"))
	st.Add(span("hb2", "s", "", "update leases", 6, 7, AttrResource, "leases", AttrName, "n"))
	if st.Trace("apply") == nil || st.Trace("hb1") != nil {
		t.Fatal("want the apply kept over the older heartbeat")
	}
}

func TestAddIgnoresASpanHeldAlready(t *testing.T) {
	st := New(Options{})
	s := span("t", "a", "", "create pods", 0, 1, AttrResource, "pods", AttrName, "p")
	st.Add(s, s)
	st.Add(s)
	if _, spans := st.Len(); spans != 1 {
		t.Fatalf("%d spans held after adding one span three times", spans)
	}
}

func TestSinkTakesIngestedSpans(t *testing.T) {
	st := New(Options{})
	var got []Span
	st.SetSink(func(s []Span) { got = append(got, s...) })
	st.ingest([]Span{span("t", "a", "", "create pods", 0, 1)})
	if len(got) != 1 || st.Trace("t") != nil {
		t.Fatalf("with a sink, ingested spans go to it (got %d) and not to the store (%v)", len(got), st.Trace("t"))
	}
	st.SetSink(nil)
	st.ingest([]Span{span("t", "a", "", "create pods", 0, 1)})
	if st.Trace("t") == nil {
		t.Fatal("without a sink, ingested spans are stored")
	}
}

// containerd's client asks the SDK for an unnamed tracer: its spans are containerd's.
func TestContainerdSpansAreNamedContainerd(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	_, s := tp.Tracer("").Start(context.Background(), "container.NewTask")
	s.End()
	if got := FromSDK(s.(sdktrace.ReadOnlySpan)).Component(); got != "containerd" {
		t.Fatalf("component of an unnamed tracer's span = %q, want containerd", got)
	}
	_, s = tp.Tracer("skiff/kubelet").Start(context.Background(), "sync pod")
	s.End()
	if got := FromSDK(s.(sdktrace.ReadOnlySpan)).Component(); got != "kubelet" {
		t.Fatalf("component = %q, want kubelet", got)
	}
}
