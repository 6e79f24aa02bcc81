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

// Setup exports spans over OTLP/HTTP to endpoint (a URL such as http://127.0.0.1:4318), or to
// what the standard OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT variables name; with neither, tracing
// stays off. Sampling follows OTEL_TRACES_SAMPLER(_ARG) (default: parent-based, always on).
// The returned func flushes and stops the exporter.
func Setup(ctx context.Context, service, endpoint string) (func(context.Context) error, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if endpoint == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return func(context.Context) error { return nil }, nil
	}
	var opts []otlptracehttp.Option
	if endpoint != "" {
		// A bare collector address means its standard traces path.
		if u, err := url.Parse(endpoint); err == nil && (u.Path == "" || u.Path == "/") {
			endpoint = strings.TrimSuffix(endpoint, "/") + "/v1/traces"
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(endpoint))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, err
	}
	res := resource.NewSchemaless(semconv.ServiceName(service))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}
