package spanstore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func span(traceID, id, parent, name string, startMs, endMs int, attrs ...string) Span {
	s := Span{TraceID: traceID, SpanID: id, ParentID: parent, Name: name, Scope: "skiff/apiserver",
		Start: t0.Add(time.Duration(startMs) * time.Millisecond), End: t0.Add(time.Duration(endMs) * time.Millisecond)}
	if len(attrs) > 0 {
		s.Attributes = map[string]string{}
		for i := 0; i+1 < len(attrs); i += 2 {
			s.Attributes[attrs[i]] = attrs[i+1]
		}
	}
	return s
}

func TestStoreEvictsLeastRecentlyUpdatedTraces(t *testing.T) {
	st := New(Options{MaxTraces: 3, MaxSpans: 5})
	for i := range 4 {
		st.Add(span(fmt.Sprint("t", i), "s1", "", "get pods", i, i+1))
	}
	if n, _ := st.Len(); n != 3 {
		t.Fatalf("%d traces held, want 3", n)
	}
	if st.Trace("t0") != nil {
		t.Fatal("the oldest trace t0 was not evicted")
	}
	// t1 gets a new span: it is now the most recent, so t2 goes next.
	st.Add(span("t1", "s2", "s1", "reconcile", 5, 6))
	st.Add(span("t4", "s1", "", "get pods", 7, 8))
	if st.Trace("t2") != nil || st.Trace("t1") == nil {
		t.Fatalf("want t2 evicted and t1 kept; t1=%v t2=%v", st.Trace("t1"), st.Trace("t2"))
	}
	// The span bound evicts too: 5 spans at most.
	st.Add(span("t5", "a", "", "x", 9, 10), span("t5", "b", "a", "y", 9, 10), span("t5", "c", "a", "z", 9, 10))
	traces, spans := st.Len()
	if spans > 5 || st.Trace("t5") == nil {
		t.Fatalf("%d traces, %d spans after the span bound; t5 present: %v", traces, spans, st.Trace("t5") != nil)
	}
}

func TestStoreFindsTracesByObjectAndLastApply(t *testing.T) {
	st := New(Options{})
	web := []string{AttrResource, "deployments", AttrNamespace, "default", AttrName, "web"}
	st.Add(span("old", "a", "", "create deployments", 0, 5, web...))
	st.Add(span("new", "b", "remote", "patch deployments", 100, 105, web...))
	st.Add(span("new", "c", "b", "reconcile deployment-controller", 110, 120, AttrController, "deployment-controller"))
	// A controller's own trace writes too, but is not a user's write.
	st.Add(span("ctl", "d", "", "reconcile replicaset-controller", 200, 210, AttrController, "replicaset-controller"))
	st.Add(span("ctl", "e", "d", "update replicasets/status", 201, 202, AttrResource, "replicasets", AttrNamespace, "default", AttrName, "web-1"))
	if got := st.ForObject("deployments", "default", "web"); got != "new" {
		t.Fatalf("ForObject = %q, want the latest trace %q", got, "new")
	}
	if got := st.ForObject("deployments", "default", "nope"); got != "" {
		t.Fatalf("ForObject of an unknown object = %q", got)
	}
	if got := st.LastApply(); got != "new" {
		t.Fatalf("LastApply without a CLI span = %q, want the latest top-level write %q", got, "new")
	}
	st.Add(span("cli", "f", "", RootApply, 50, 60))
	if got := st.LastApply(); got != "cli" {
		t.Fatalf("LastApply = %q, want the trace rooted in %q", got, RootApply)
	}
	spans := st.Trace("new")
	if len(spans) != 2 || spans[0].Name != "patch deployments" || spans[1].Component() != "deployment-controller" {
		t.Fatalf("Trace(new) = %+v", spans)
	}
}

func TestHandlerRejectsBadQueries(t *testing.T) {
	srv := httptest.NewServer(New(Options{}).Handler())
	defer srv.Close()
	for q, want := range map[string]int{"": 400, "?object=a/b/c/d": 400, "?last=delete": 400, "?trace=abc": 404, "?object=deployments/default/web": 404} {
		resp, err := http.Get(srv.URL + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %q: %d, want %d", q, resp.StatusCode, want)
		}
	}
}

// Spans another process exports with the real OTLP/HTTP exporter land in the store, with
// their service, scope, parent and attributes, and are served back as JSON.
func TestOTLPReceiverStoresExportedSpans(t *testing.T) {
	st := New(Options{})
	mux := http.NewServeMux()
	mux.Handle(OTLPPath, st.OTLPHandler())
	mux.Handle(TracePath, st.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(srv.URL+OTLPPath))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("skiff-agent"))))
	pctx, parent := tp.Tracer("skiff/kubelet").Start(ctx, "sync pod", trace.WithAttributes(
		attribute.String(AttrResource, "pods"), attribute.String(AttrNamespace, "default"), attribute.String(AttrName, "web-1")))
	_, child := tp.Tracer("skiff/kubelet").Start(pctx, "start container")
	child.End()
	parent.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	resp, err := http.Get(srv.URL + TracePath + "?object=pods/default/web-1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET trace: %s", resp.Status)
	}
	var res Result
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	if res.TraceID != parent.SpanContext().TraceID().String() || len(res.Spans) != 2 {
		t.Fatalf("got trace %s with %d spans, want %s with 2", res.TraceID, len(res.Spans), parent.SpanContext().TraceID())
	}
	p, c := res.Spans[0], res.Spans[1]
	if p.Name != "sync pod" || p.Service != "skiff-agent" || p.Component() != "kubelet" || p.Kind != "internal" || p.ParentID != "" {
		t.Errorf("parent span: %+v", p)
	}
	if c.Name != "start container" || c.ParentID != p.SpanID || c.End.Before(c.Start) {
		t.Errorf("child span: %+v", c)
	}

	// Not protobuf: refused, nothing stored.
	bad, err := http.Post(srv.URL+OTLPPath, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	bad.Body.Close()
	if bad.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("JSON export: %s, want 415", bad.Status)
	}
}

// The store as the tracer provider's processor keeps this process's spans.
func TestStoreIsASpanProcessor(t *testing.T) {
	st := New(Options{})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(st))
	_, s := tp.Tracer("skiff/scheduler").Start(context.Background(), "schedule pod")
	s.End()
	got := st.Trace(s.SpanContext().TraceID().String())
	if len(got) != 1 || got[0].Component() != "scheduler" || got[0].Name != "schedule pod" {
		t.Fatalf("stored %+v", got)
	}
}

// The store sits in every span's End: it must stay cheap at its bounds.
func BenchmarkStoreOnEnd(b *testing.B) {
	st := New(Options{MaxTraces: 200, MaxSpans: 100000})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(st))
	tr := tp.Tracer("skiff/apiserver")
	ctx := context.Background()
	attrs := trace.WithAttributes(attribute.String(AttrResource, "pods"), attribute.String(AttrNamespace, "default"), attribute.String(AttrName, "p"))
	b.ReportAllocs()
	for b.Loop() {
		// Every span its own trace, the worst case: each Add evicts once the bound is reached.
		_, s := tr.Start(ctx, "create pods", attrs)
		s.End()
	}
}
