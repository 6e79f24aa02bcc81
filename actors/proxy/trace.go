package proxy

import (
	"context"
	"net/netip"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/skiff-sh/skiff/bpf/lb"
	"github.com/skiff-sh/skiff/bpf/nodeport"
	"github.com/skiff-sh/skiff/internal/tracing"
)

// noteService and noteSlice record the trace of a write as a cause of its Service's next sync.
func (p *Proxy) noteService(key string) {
	ns, name := splitKey(key)
	p.links.Add(key, p.svcs.TraceContext(context.Background(), ns, name))
}

func (p *Proxy) noteSlice(svcKey, namespace, name string) {
	p.links.Add(svcKey, p.slices.TraceContext(context.Background(), namespace, name))
}

// tracedSync reprograms one Service in the span "proxy update service maps": a child of the
// newest Service or EndpointSlice write that woke it (the endpointslice controller's write
// when a pod turned Ready), linked to the other writes the sync folds in.
func (p *Proxy) tracedSync(dp *lb.Dataplane, np *nodeport.Dataplane, key string) error {
	causes := p.links.Take(key)
	ctx := context.Background()
	var opts []trace.SpanStartOption
	if n := len(causes); n > 0 {
		ctx = trace.ContextWithRemoteSpanContext(ctx, causes[n-1].SpanContext)
		opts = append(opts, trace.WithLinks(causes[:n-1]...))
	}
	opts = append(opts, trace.WithAttributes(attribute.String("k8s.service", key), attribute.String("k8s.node.name", p.cfg.NodeName)))
	ctx, span := otel.Tracer("skiff/proxy").Start(ctx, "proxy update service maps", opts...)
	err := p.sync(ctx, dp, np, key)
	tracing.End(span, err)
	return err
}

// traceSync puts what one sync did on its span.
func traceSync(ctx context.Context, want map[lb.ServiceKey]lb.ServiceSpec, st Stats) {
	eps := map[netip.Addr]bool{}
	for _, s := range want {
		for _, b := range s.Backends {
			eps[b.Addr] = true
		}
	}
	trace.SpanFromContext(ctx).SetAttributes(
		attribute.Int("skiff.proxy.service_ports", len(want)),
		attribute.Int("skiff.proxy.endpoints", len(eps)),
		attribute.Int("skiff.proxy.entries_written", st.ServiceWrites+st.BackendWrites+st.BackendDeletes+st.Deletes))
}
