package nodebin_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/internal/nodebin"
)

// The test binary is a multi-call binary too: started as an entry, it runs that entry.
func TestMain(m *testing.M) {
	nodebin.Run()
	os.Exit(m.Run())
}

func TestEntriesAnswerByName(t *testing.T) {
	dir := t.TempDir()
	if err := nodebin.Install(dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"containerd":              "containerd github.com/containerd/containerd/v2",
		"containerd-shim-runc-v2": "containerd-shim-runc-v2:",
	} {
		flag := "--version"
		if strings.HasPrefix(name, "containerd-shim") {
			flag = "-v"
		}
		out, err := exec.Command(filepath.Join(dir, name), flag).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, flag, err, out)
		}
		if !strings.Contains(string(out), want) {
			t.Errorf("%s %s printed %q, want it to contain %q", name, flag, out, want)
		}
	}
}

func TestInstallReplacesStaleLinks(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "containerd")
	if err := os.Symlink("/nonexistent/old-skiff", stale); err != nil {
		t.Fatal(err)
	}
	if err := nodebin.Install(dir); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodebin.Names() {
		got, err := os.Readlink(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if got != self {
			t.Errorf("%s links to %s, want %s", n, got, self)
		}
	}
	if err := nodebin.Install(dir); err != nil { // again: nothing to change
		t.Fatal(err)
	}
}
