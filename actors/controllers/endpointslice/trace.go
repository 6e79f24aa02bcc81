package endpointslice

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/skiff-sh/skiff/internal/tracing"
)

// notePod records the trace of a pod write as a cause of the Service's next sync.
func (c *controller) notePod(svcKey, namespace, name string) {
	c.links.Add(svcKey, c.pods.TraceContext(context.Background(), namespace, name))
}

// tracedSync runs sync so that its EndpointSlice writes continue the trace of what changed.
// controllerkit's reconcile span (ctx) follows the Service's latest write; when pod writes
// woke the Service (a pod turning Ready: the kubelet's status write), the sync runs in the span
// "endpointslice sync", a child of the newest of those writes, linked to the reconcile span and
// to the other pod writes it folds in.
func (c *controller) tracedSync(ctx context.Context, key string) error {
	causes := c.links.Take(key)
	if len(causes) == 0 {
		return c.sync(ctx, key)
	}
	newest := causes[len(causes)-1].SpanContext
	links := append(causes[:len(causes)-1:len(causes)-1], trace.Link{SpanContext: trace.SpanContextFromContext(ctx)})
	sctx, span := otel.Tracer("skiff/controllers").Start(trace.ContextWithRemoteSpanContext(ctx, newest), "endpointslice sync",
		trace.WithLinks(links...), trace.WithAttributes(attribute.String("skiff.controller", Name), attribute.String("skiff.key", key)))
	err := c.sync(sctx, key)
	tracing.End(span, err)
	return err
}
