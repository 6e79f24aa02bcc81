// Package cgrouptest is the harness for tests of cgroup socket hooks: a private cgroup2 child
// and bpffs, and a client process (the test binary re-executed) placed into that child at clone
// time, so the hooks never touch the test process itself.
package cgrouptest

import (
	"fmt"
	"github.com/skiff-sh/skiff/testkit/needs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// NeedRoot skips the test unless it runs as root; why names what root is needed for.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		needs.Skip(t, "needs root "+why)
	}
}

// Child mounts the cgroup2 hierarchy privately and makes a uniquely named child in it (other
// packages' tests use the same hierarchy at the same time). It is removed when the test ends;
// a client started in it afterwards is reaped first, so the rmdir never waits.
func Child(t testing.TB, prefix string) string {
	t.Helper()
	root := t.TempDir()
	if err := unix.Mount("none", root, "cgroup2", 0, ""); err != nil {
		needs.Skipf(t, "cannot mount cgroup2: %v", err)
	}
	child := filepath.Join(root, fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(child, 0o755); err != nil {
		unix.Unmount(root, 0)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(child); err != nil {
			t.Errorf("remove cgroup: %v", err)
		}
		if err := unix.Unmount(root, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount cgroup2: %v", err)
		}
	})
	return child
}
