package controllerkit

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// startSpan opens the span of one reconcile as a child of the trace stored with the key's last
// write (TraceParent; by default in the primary, first watched, informer), so a rollout is one
// trace across controllers. A key enqueued only by a periodic resync starts a new trace linked
// to that write instead.
func (c *Controller) startSpan(ctx context.Context, key string) (context.Context, trace.Span) {
	parent := ctx
	switch {
	case c.TraceParent != nil:
		parent = c.TraceParent(ctx, key)
	case len(c.Watches) > 0:
		ns, name := SplitKey(key)
		parent = c.Watches[0].Informer.TraceContext(ctx, ns, name)
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(attribute.String("skiff.controller", c.Name), attribute.String("skiff.key", key))}
	if c.Queue.takeResynced(key) {
		opts = append(opts, trace.WithNewRoot(), trace.WithAttributes(attribute.Bool("skiff.resync", true)))
		if trace.SpanContextFromContext(parent).IsValid() {
			opts = append(opts, trace.WithLinks(trace.LinkFromContext(parent)))
		}
	}
	return otel.Tracer("skiff/controllers").Start(parent, "reconcile "+c.Name, opts...)
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
