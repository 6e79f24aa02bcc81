package apiserver_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

// FuzzCreateBody throws arbitrary bodies at the create path: the server must never fail with a
// 5xx, and a refused request must leave the log untouched.
func FuzzCreateBody(f *testing.F) {
	for _, seed := range []string{podJSON("p", ""), `{}`, `[]`, `null`, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"i","ports":[{"containerPort":99999}]}]}}`} {
		f.Add([]byte(seed), "application/json")
	}
	bad, _ := filepath.Glob(filepath.Join(testutil.RepoRoot(), "schemas", "testdata", "bad", "*"))
	for _, p := range bad {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data, "application/yaml")
		}
	}
	f.Add([]byte{0x6b, 0x38, 0x73, 0x00, 0x0a, 0x02}, "application/vnd.kubernetes.protobuf")
	cp := testutil.StartControlPlane(f, apiOnly)
	h := cp.API.Handler()
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		before := cp.Log.Rev()
		req := httptest.NewRequest(http.MethodPost, podsPath+"?fieldValidation=Strict", bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("HTTP %d for %q: %s", rec.Code, body, rec.Body.String())
		}
		if rec.Code >= 400 && cp.Log.Rev() != before {
			t.Fatalf("refused request (HTTP %d) wrote to the log", rec.Code)
		}
	})
}

// FuzzRequestPath checks that no path, method or query makes the router fail or write.
func FuzzRequestPath(f *testing.F) {
	for _, p := range []string{"/api/v1/namespaces/default/pods", "/apis/apps/v1/namespaces/x/deployments/y/scale", "/api/v1/watch/pods", "/api/v1/namespaces/a/status", "/apis//v1", "/api/v1/namespaces/default/pods/p/binding?watch=1"} {
		f.Add(p, "GET")
		f.Add(p, "DELETE")
	}
	cp := testutil.StartControlPlane(f, apiOnly)
	h := cp.API.Handler()
	f.Fuzz(func(t *testing.T, path, method string) {
		// A watch streams until its context ends: give every request a short one.
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, "http://x"+path, http.NoBody)
		if err != nil {
			return // not a request a client can send
		}
		before := cp.Log.Rev()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s: HTTP %d: %s", method, path, rec.Code, rec.Body.String())
		}
		if method != http.MethodDelete && method != http.MethodPost && method != http.MethodPut && method != http.MethodPatch && cp.Log.Rev() != before {
			t.Fatalf("%s %s wrote to the log", method, path)
		}
	})
}
