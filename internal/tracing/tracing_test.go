package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel"
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
