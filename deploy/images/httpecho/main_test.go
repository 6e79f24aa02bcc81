package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func status(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Code, rec.Body.String()
}

func TestProbesFlipAtRuntime(t *testing.T) {
	h := newServer().routes()
	for _, p := range []string{"/healthz", "/ready"} {
		if code, _ := status(t, h, p); code != 200 {
			t.Fatalf("%s: %d before /fail", p, code)
		}
	}
	status(t, h, "/fail?what=ready")
	if code, _ := status(t, h, "/ready"); code != 503 {
		t.Errorf("/ready after /fail?what=ready: %d", code)
	}
	if code, _ := status(t, h, "/healthz"); code != 200 {
		t.Errorf("/healthz must stay up: %d", code)
	}
	status(t, h, "/recover")
	if code, _ := status(t, h, "/ready"); code != 200 {
		t.Errorf("/ready after /recover: %d", code)
	}
}

func TestEnvMakesProbesFail(t *testing.T) {
	t.Setenv("HEALTHZ_FAIL", "1")
	t.Setenv("READY_AFTER", "1h")
	h := newServer().routes()
	if code, _ := status(t, h, "/healthz"); code != 503 {
		t.Errorf("/healthz with HEALTHZ_FAIL=1: %d", code)
	}
	if code, _ := status(t, h, "/ready"); code != 503 {
		t.Errorf("/ready before READY_AFTER: %d", code)
	}
}

func TestRootAndAlloc(t *testing.T) {
	t.Setenv("POD_NAME", "web-1")
	t.Setenv("POD_IP", "10.0.0.7")
	h := newServer().routes()
	_, body := status(t, h, "/")
	var i Info
	if err := json.Unmarshal([]byte(body), &i); err != nil || i.Pod != "web-1" || i.IP != "10.0.0.7" || i.Hostname == "" {
		t.Errorf("/ = %q (%v)", body, err)
	}
	if code, _ := status(t, h, "/alloc?mb=x"); code != 400 {
		t.Errorf("bad mb: %d", code)
	}
	if code, body := status(t, h, "/alloc?mb=2"); code != 200 || !strings.Contains(body, "total 2 MiB") {
		t.Errorf("alloc: %d %q", code, body)
	}
}

func TestAppendAddsALineAndExitsWithTheCode(t *testing.T) {
	path := t.TempDir() + "/order"
	if code := runAppend(path+"=first", 0); code != 0 {
		t.Fatalf("first: exit %d", code)
	}
	if code := runAppend(path+"=second", 3); code != 3 {
		t.Fatalf("second: exit %d, want the -exit-code 3", code)
	}
	if code := runAppend(path, 0); code != 2 {
		t.Errorf("no =LINE: exit %d, want 2", code)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "first\nsecond\n" {
		t.Errorf("file %q (%v), want both lines in order", b, err)
	}
}
