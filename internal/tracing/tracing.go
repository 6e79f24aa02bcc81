// Package tracing installs a process's OpenTelemetry tracer provider.
package tracing

import (
	"context"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// Option adds to what Setup installs.
type Option func(*options)

type options struct{ processors []sdktrace.SpanProcessor }

// WithProcessor also hands every span to p (an in-memory span store, say); with it tracing is
// on even when no OTLP endpoint is configured. A nil p is ignored.
func WithProcessor(p sdktrace.SpanProcessor) Option {
	return func(o *options) {
		if p != nil {
			o.processors = append(o.processors, p)
		}
	}
}

// SetPropagator makes W3C trace context (and baggage) travel with this process's requests: in
// NATS requests, HTTP headers and every write stored in the log. A process that records no
// spans of its own (simulated nodes) still passes on the trace of the object it writes.
func SetPropagator() {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
}

// Setup exports spans over OTLP/HTTP to endpoint (a URL such as http://127.0.0.1:4318), or to
// what the standard OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT variables name; with neither and no
// WithProcessor, tracing stays off. Sampling follows OTEL_TRACES_SAMPLER(_ARG) when set; by
// default every trace is kept (parent-based) but heartbeats, sampled at HeartbeatSampleRate,
// up to as many spans of each as a span store keeps. The returned func flushes and stops the
// exporter.
func Setup(ctx context.Context, service, endpoint string, opt ...Option) (func(context.Context) error, error) {
	SetPropagator()
	var o options
	for _, f := range opt {
		f(&o)
	}
	export := endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	if !export && len(o.processors) == 0 {
		return func(context.Context) error { return nil }, nil
	}
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(service)))}
	if os.Getenv("OTEL_TRACES_SAMPLER") == "" {
		tpOpts = append(tpOpts, sdktrace.WithSampler(newSampler()))
	}
	if export {
		exp, err := NewExporter(ctx, endpoint)
		if err != nil {
			return nil, err
		}
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
	}
	for _, p := range o.processors {
		tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(p))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// NewExporter is an OTLP/HTTP exporter to endpoint ("" = the OTEL_* variables); a bare
// collector address means its standard traces path.
func NewExporter(ctx context.Context, endpoint string, opt ...otlptracehttp.Option) (sdktrace.SpanExporter, error) {
	if endpoint != "" {
		if u, err := url.Parse(endpoint); err == nil && (u.Path == "" || u.Path == "/") {
			endpoint = strings.TrimSuffix(endpoint, "/") + "/v1/traces"
		}
		opt = append([]otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint)}, opt...)
	}
	return otlptracehttp.New(ctx, opt...)
}
