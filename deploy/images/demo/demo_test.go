package demo_test

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/deploy/images/demo"
	"github.com/skiff-sh/skiff/deploy/images/examples"
)

// The carried image is what the httpecho source builds to today: built from the same source,
// and, where the toolchain is the one that built it, byte for byte.
func TestCarriedImageIsCurrent(t *testing.T) {
	src, err := examples.HTTPEchoSource()
	if err != nil {
		t.Fatal(err)
	}
	digest, goVersion, _ := strings.Cut(strings.TrimSpace(demo.Source), " ")
	if digest != src {
		t.Fatalf("deploy/images/httpecho changed since deploy/images/demo/httpecho.tar was built: run go generate ./deploy/images/demo")
	}
	if goVersion != runtime.Version() {
		t.Logf("the carried image was built by %s, this is %s: the bytes are not compared", goVersion, runtime.Version())
		return
	}
	fresh, err := examples.BuildHTTPEcho(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, demo.HTTPEcho) {
		t.Fatalf("deploy/images/demo/httpecho.tar (%d bytes) differs from a fresh build of deploy/images/httpecho (%d bytes): run go generate ./deploy/images/demo", len(demo.HTTPEcho), len(b))
	}
}

func TestWriteLeavesIdenticalFile(t *testing.T) {
	dir := t.TempDir()
	if err := demo.Write(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "httpecho.tar")
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if before.Size() != int64(len(demo.HTTPEcho)) {
		t.Fatalf("wrote %d bytes, want %d", before.Size(), len(demo.HTTPEcho))
	}
	if err := demo.Write(dir); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Fatal("a second Write replaced an identical file")
	}
	if err := os.WriteFile(path, []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := demo.Write(dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, demo.HTTPEcho) {
		t.Fatal("a stale file was not replaced")
	}
}
