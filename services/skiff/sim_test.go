package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// --pprof-listen serves the CPU profile the system benchmark fetches, until the command ends.
func TestServePprof(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := servePprof(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/debug/pprof/profile?seconds=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// A CPU profile is gzipped protobuf.
	if resp.StatusCode != http.StatusOK || len(body) < 2 || body[0] != 0x1f || body[1] != 0x8b {
		t.Fatalf("profile: HTTP %d, %d bytes", resp.StatusCode, len(body))
	}
	cancel()
	if _, err := servePprof(context.Background(), "127.0.0.1:-1"); err == nil || !strings.Contains(err.Error(), "--pprof-listen") {
		t.Fatalf("bad address: %v", err)
	}
}
