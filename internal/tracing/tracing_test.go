package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Spans reach an OTLP/HTTP receiver at the configured endpoint.
func TestSetupExportsOverOTLPHTTP(t *testing.T) {
	got := make(chan int, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			got <- len(body)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	prev := otel.GetTracerProvider()
	defer otel.SetTracerProvider(prev)
	shutdown, err := Setup(context.Background(), "skiff-test", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("test").Start(context.Background(), "hello")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n == 0 {
			t.Fatal("empty export")
		}
	default:
		t.Fatal("no span reached the OTLP receiver")
	}
}

// With a processor and no OTLP endpoint, tracing is on and the processor sees every span.
func TestSetupWithProcessorOnly(t *testing.T) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(v, "")
	}
	prev := otel.GetTracerProvider()
	defer otel.SetTracerProvider(prev)
	rec := tracetest.NewSpanRecorder()
	shutdown, err := Setup(context.Background(), "skiff-test", "", WithProcessor(rec), WithProcessor(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("test").Start(context.Background(), "hello")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rec.Ended(); len(got) != 1 || got[0].Name() != "hello" {
		t.Fatalf("the processor saw %d spans", len(got))
	}
}
