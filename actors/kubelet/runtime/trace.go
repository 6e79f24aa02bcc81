package runtime

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/skiff-sh/skiff/internal/tracing"
)

// op opens the span "containerd <name>" of one runtime operation inside the caller's trace
// (a pod sync). Outside any trace (housekeeping, diagnostics) nothing is recorded, so periodic
// work does not flood the exporter with root spans. end records the error, if any.
func op(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, func(err *error)) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, func(*error) {}
	}
	ctx, span := otel.Tracer("skiff/containerd").Start(ctx, "containerd "+name,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, func(err *error) { tracing.End(span, *err) }
}

func podAttr(uid string) attribute.KeyValue { return attribute.String("k8s.pod.uid", uid) }

func containerAttr(id string) attribute.KeyValue { return attribute.String("container.id", id) }
