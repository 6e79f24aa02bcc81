package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWget(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("body of " + r.URL.Path))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	t.Chdir(t.TempDir())

	// As a chart's test pod calls it: host:port, no scheme, saved as index.html.
	var stdout, stderr bytes.Buffer
	if code := wget([]string{host}, &stdout, &stderr); code != 0 {
		t.Fatalf("wget %s: exit %d: %s", host, code, stderr.String())
	}
	if b, err := os.ReadFile("index.html"); err != nil || string(b) != "body of /" {
		t.Fatalf("index.html %q %v", b, err)
	}
	if !strings.Contains(stderr.String(), "Connecting to "+host) {
		t.Errorf("stderr %q", stderr.String())
	}
	if code := wget([]string{"-q", "-O", "-", srv.URL + "/a/b.txt"}, &stdout, &stderr); code != 0 || !strings.HasSuffix(stdout.String(), "body of /a/b.txt") {
		t.Fatalf("-O -: exit %d, stdout %q", code, stdout.String())
	}
	stderr.Reset()
	if code := wget([]string{srv.URL + "/missing"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "wget: server returned error: HTTP/1.1 404 Not Found") {
		t.Fatalf("404: exit %d, stderr %q", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(".", "missing")); err == nil {
		t.Errorf("an error status wrote a file")
	}
	stderr.Reset()
	if code := wget([]string{"-T", "1", "127.0.0.1:1"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "can't connect to remote host") {
		t.Fatalf("refused: exit %d, stderr %q", code, stderr.String())
	}
}
