package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/skiff-sh/skiff/internal/spanstore"
)

// With tracing off in the CLI (no exporter configured), one `skiff apply` still sends one
// sampled trace id with every request, so the servers' spans of the apply are one trace.
func TestApplySendsOneTraceparentWithTracingOff(t *testing.T) {
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(noop.NewTracerProvider())
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == spanstore.OTLPPath {
			return // the CLI's own span, sent to the server's span store
		}
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Header.Get("traceparent"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.Copy(w, r.Body)
	}))
	defer srv.Close()
	manifest := filepath.Join(t.TempDir(), "cms.yaml")
	docs := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"
	if err := os.WriteFile(manifest, []byte(docs), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, srv.URL, "apply", "-f", manifest); err != nil {
		t.Fatalf("apply: %v: %s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 4 {
		t.Fatalf("requests %v, want a GET and a POST per object", seen)
	}
	var trace string
	for _, s := range seen {
		_, tp, _ := strings.Cut(s, " ")
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || parts[3] != "01" {
			t.Fatalf("request %q carries no sampled traceparent", s)
		}
		if trace == "" {
			trace = parts[1]
		}
		if parts[1] != trace {
			t.Fatalf("requests carry different trace ids: %v", seen)
		}
	}
}
