// Package spanstore keeps a process's recent trace spans in memory, bounded, indexed by trace
// and by the API objects a trace touched, so `skiff trace` can draw a rollout with no tracing
// backend. Spans arrive from this process's tracer provider (the Store is an sdktrace
// SpanProcessor) and from other processes over OTLP/HTTP (OTLPHandler).
package spanstore

import (
	"container/list"
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// Attributes the apiserver puts on request spans to name the object a request touched.
const (
	AttrResource    = "k8s.resource"
	AttrNamespace   = "k8s.namespace"
	AttrName        = "k8s.name"
	AttrSubresource = "k8s.subresource"
	// AttrController names the controller of a reconcile span.
	AttrController = "skiff.controller"
)

// RootApply is the name of the CLI's root span of `skiff apply`.
const RootApply = "skiff apply"

// Span is one finished span, in the form the store keeps and serves as JSON.
type Span struct {
	TraceID    string            `json:"traceID"`
	SpanID     string            `json:"spanID"`
	ParentID   string            `json:"parentID,omitempty"`
	Name       string            `json:"name"`
	Service    string            `json:"service,omitempty"`
	Scope      string            `json:"scope,omitempty"`
	Kind       string            `json:"kind,omitempty"`
	Start      time.Time         `json:"start"`
	End        time.Time         `json:"end"`
	Error      string            `json:"error,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

// Component is who did the work: the controller of a reconcile, else the instrumentation
// scope without its "skiff/" prefix (apiserver, scheduler, kubelet, ...), else the service.
func (s Span) Component() string {
	if c := s.Attributes[AttrController]; c != "" {
		return c
	}
	switch s.Scope {
	case "":
		return s.Service
	case unnamedScope:
		// Skiff names every tracer "skiff/<component>"; the one library in its processes that
		// asks for an unnamed tracer is containerd's client (its pkg/tracing).
		return "containerd"
	}
	return strings.TrimPrefix(s.Scope, "skiff/")
}

// unnamedScope is the instrumentation scope the OpenTelemetry SDK gives a tracer asked for
// with no name.
const unnamedScope = "go.opentelemetry.io/otel/sdk/tracer"

// Object is the "resource/namespace/name" (or "resource/name" when cluster-scoped) the span
// names, or "" when it names none.
func (s Span) Object() string {
	res, name := s.Attributes[AttrResource], s.Attributes[AttrName]
	if res == "" || name == "" {
		return ""
	}
	return ObjectKey(res, s.Attributes[AttrNamespace], name)
}

// ObjectKey is how the store names an object in its index.
func ObjectKey(resource, namespace, name string) string {
	if namespace == "" {
		return resource + "/" + name
	}
	return resource + "/" + namespace + "/" + name
}

// isRead: an API request span that changed nothing.
func (s Span) isRead() bool {
	verb, _, _ := strings.Cut(s.Name, " ")
	return (verb == "get" || verb == "list") && s.Attributes[AttrResource] != ""
}

// isWrite: an API request span that changed something.
func (s Span) isWrite() bool {
	verb, _, _ := strings.Cut(s.Name, " ")
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return s.Attributes[AttrResource] != ""
	}
	return false
}

type traceEntry struct {
	id      string
	spans   []Span
	spanIDs map[string]bool
	objects map[string]bool
	start   time.Time     // earliest span start
	elem    *list.Element // in the list of its tier, most recently updated at the back
	tier    tier
}

// Options bound a Store.
type Options struct {
	MaxTraces        int // default 200
	MaxSpans         int // all traces together; default 100000
	MaxSpansPerTrace int // spans past this are dropped; default DefaultMaxSpansPerTrace
}

// DefaultMaxSpansPerTrace is how many spans of one trace a store keeps: a rollout of 10,000
// pods is one trace of many times that, and its first spans already show what it did.
const DefaultMaxSpansPerTrace = 10000

// Store holds recent traces. The zero value is not usable; call New.
type Store struct {
	opts     Options
	mu       sync.Mutex
	traces   map[string]*traceEntry
	byObject map[string]map[string]bool // object key -> trace ids
	spans    int
	byTier   [tiers]*list.List // of *traceEntry, least recently updated first
	sink     atomic.Pointer[func([]Span)]
}

// New returns an empty Store.
func New(o Options) *Store {
	if o.MaxTraces <= 0 {
		o.MaxTraces = 200
	}
	if o.MaxSpans <= 0 {
		o.MaxSpans = 100000
	}
	if o.MaxSpansPerTrace <= 0 {
		o.MaxSpansPerTrace = DefaultMaxSpansPerTrace
	}
	st := &Store{opts: o, traces: map[string]*traceEntry{}, byObject: map[string]map[string]bool{}}
	for i := range st.byTier {
		st.byTier[i] = list.New()
	}
	return st
}

// SetSink makes the store hand the spans it is given (by this process's tracer and over
// OTLP) to sink instead of Add: a shared stream that feeds them back through Add, so every
// apiserver replica holds the same traces and they outlive a restart. sink must not block a
// traced request; nil stores spans directly again.
func (st *Store) SetSink(sink func([]Span)) {
	if sink == nil {
		st.sink.Store(nil)
		return
	}
	st.sink.Store(&sink)
}

// ingest hands spans of this process or of an OTLP sender to the sink, or stores them.
func (st *Store) ingest(spans []Span) {
	if sink := st.sink.Load(); sink != nil {
		(*sink)(spans)
		return
	}
	st.Add(spans...)
}

// Add stores finished spans; a span already held (same trace and span id) is ignored, so a
// replay of the stream that fed the store is harmless.
func (st *Store) Add(spans ...Span) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, s := range spans {
		if s.TraceID == "" || s.SpanID == "" {
			continue
		}
		t := st.traces[s.TraceID]
		if t == nil {
			t = &traceEntry{id: s.TraceID, spanIDs: map[string]bool{}, objects: map[string]bool{}, start: s.Start}
			t.elem = st.byTier[t.tier].PushBack(t)
			st.traces[s.TraceID] = t
		}
		if len(t.spans) >= st.opts.MaxSpansPerTrace || t.spanIDs[s.SpanID] {
			continue
		}
		t.spans = append(t.spans, s)
		t.spanIDs[s.SpanID] = true
		st.spans++
		if c := s.tier(t.spanIDs[s.ParentID]); c > t.tier {
			st.byTier[t.tier].Remove(t.elem)
			t.elem, t.tier = st.byTier[c].PushBack(t), c
		} else {
			st.byTier[t.tier].MoveToBack(t.elem)
		}
		if s.Start.Before(t.start) {
			t.start = s.Start
		}
		if obj := s.Object(); obj != "" && !t.objects[obj] {
			t.objects[obj] = true
			if st.byObject[obj] == nil {
				st.byObject[obj] = map[string]bool{}
			}
			st.byObject[obj][s.TraceID] = true
		}
	}
	st.evict()
}

// evict drops the least recently updated traces of the lowest tier held until both bounds
// hold: reads go first, then heartbeats and components' own work, users' writes last.
func (st *Store) evict() {
	for len(st.traces) > st.opts.MaxTraces || (st.spans > st.opts.MaxSpans && len(st.traces) > 1) {
		for _, from := range st.byTier {
			if from.Len() > 0 {
				st.drop(from, from.Front().Value.(*traceEntry))
				break
			}
		}
	}
}

func (st *Store) drop(from *list.List, t *traceEntry) {
	from.Remove(t.elem)
	delete(st.traces, t.id)
	st.spans -= len(t.spans)
	for obj := range t.objects {
		delete(st.byObject[obj], t.id)
		if len(st.byObject[obj]) == 0 {
			delete(st.byObject, obj)
		}
	}
}

// Len is the number of traces and spans held.
func (st *Store) Len() (traces, spans int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.traces), st.spans
}

// Trace returns a copy of the trace's spans ordered by start time (nil if unknown).
func (st *Store) Trace(id string) []Span {
	st.mu.Lock()
	defer st.mu.Unlock()
	t := st.traces[id]
	if t == nil {
		return nil
	}
	out := append([]Span(nil), t.spans...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// ForObject returns the id of the latest-starting trace that touched the object ("" if none).
func (st *Store) ForObject(resource, namespace, name string) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	var best *traceEntry
	for id := range st.byObject[ObjectKey(resource, namespace, name)] {
		if t := st.traces[id]; best == nil || t.start.After(best.start) {
			best = t
		}
	}
	if best == nil {
		return ""
	}
	return best.id
}

// LastApply returns the id of the latest-starting trace rooted in a `skiff apply`, or, when no
// such trace is held (the CLI did not send its span), the latest one where an API write is a
// top-level span (its parent is not in the store): a user's write, not a controller's ("" if none).
func (st *Store) LastApply() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	var apply, write *traceEntry
	for _, t := range st.traces {
		for _, s := range t.topLevel() {
			if s.Name == RootApply && (apply == nil || t.start.After(apply.start)) {
				apply = t
			}
			if s.isWrite() && (write == nil || t.start.After(write.start)) {
				write = t
			}
		}
	}
	switch {
	case apply != nil:
		return apply.id
	case write != nil:
		return write.id
	}
	return ""
}

// topLevel are the spans whose parent is not in the trace.
func (t *traceEntry) topLevel() []Span {
	ids := make(map[string]bool, len(t.spans))
	for _, s := range t.spans {
		ids[s.SpanID] = true
	}
	var out []Span
	for _, s := range t.spans {
		if !ids[s.ParentID] {
			out = append(out, s)
		}
	}
	return out
}

// OnStart is part of sdktrace.SpanProcessor; spans are stored when they end.
func (st *Store) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd stores a span of this process.
func (st *Store) OnEnd(s sdktrace.ReadOnlySpan) { st.ingest([]Span{FromSDK(s)}) }

// Shutdown is part of sdktrace.SpanProcessor; the store keeps serving what it holds.
func (st *Store) Shutdown(context.Context) error { return nil }

// ForceFlush is part of sdktrace.SpanProcessor; nothing is buffered.
func (st *Store) ForceFlush(context.Context) error { return nil }

// FromSDK converts a finished SDK span.
func FromSDK(s sdktrace.ReadOnlySpan) Span {
	out := Span{
		TraceID: s.SpanContext().TraceID().String(),
		SpanID:  s.SpanContext().SpanID().String(),
		Name:    s.Name(),
		Scope:   s.InstrumentationScope().Name,
		Kind:    s.SpanKind().String(),
		Start:   s.StartTime(),
		End:     s.EndTime(),
	}
	if p := s.Parent(); p.IsValid() {
		out.ParentID = p.SpanID().String()
	}
	if s.Status().Code == codes.Error {
		out.Error = s.Status().Description
		if out.Error == "" {
			out.Error = "error"
		}
	}
	if r := s.Resource(); r != nil {
		if v, ok := r.Set().Value(semconv.ServiceNameKey); ok {
			out.Service = v.Emit()
		}
	}
	out.Attributes = attrMap(s.Attributes())
	return out
}

func attrMap(kvs []attribute.KeyValue) map[string]string {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}
