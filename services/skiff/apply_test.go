package main

import (
	"context"
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
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/internal/spanstore"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
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

// A second `skiff apply` is a forced server-side apply: a field another manager changed
// meanwhile is taken back, a key the previous apply set and this one drops goes, and an
// unchanged manifest writes nothing.
func TestApplyAgainConfiguresByFieldOwnership(t *testing.T) {
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) { c.Components = []string{"apiserver"} })
	dir := t.TempDir()
	write := func(data string) string {
		p := filepath.Join(dir, "cm.yaml")
		if err := os.WriteFile(p, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {"+data+"}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	apply := func(want string, data string) {
		t.Helper()
		if out, err := runCLI(t, cp.URL(), "apply", "-f", write(data)); err != nil || !strings.Contains(out, want) {
			t.Fatalf("apply {%s}: want %q: %v: %s", data, want, err, out)
		}
	}
	apply("configmap/a created", "x: '1'")
	apply("configmap/a configured", "x: '1', z: '2'")
	cms := cp.Client
	ctx := context.Background()
	k, _ := schemas.ByResource("", "v1", "configmaps")
	if _, err := cms.Patch(ctx, k, "default", "a", "", "application/merge-patch+json", []byte(`{"data":{"x":"other"}}`)); err != nil {
		t.Fatal(err)
	}
	apply("configmap/a configured", "x: '1'")
	apply("configmap/a unchanged", "x: '1'")
	obj, err := cms.Get(ctx, k, "default", "a")
	if err != nil {
		t.Fatal(err)
	}
	if data := obj.(*corev1.ConfigMap).Data; len(data) != 1 || data["x"] != "1" {
		t.Fatalf("after re-apply: %v, want only x=1", data)
	}
}
