package netnsexec_test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/internal/netnsexec"
	"github.com/skiff-sh/skiff/testkit/needs"
)

// nsOf is the inode of the namespace path names (a /proc link or a bind mount).
func nsOf(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// Run moves the thread into the named namespace for fn alone, and reports a namespace that
// does not exist without running fn.
func TestRunEntersAndReturns(t *testing.T) {
	if os.Geteuid() != 0 {
		needs.Skip(t, "needs root to make a network namespace")
	}
	name := fmt.Sprintf("skt-nsexec-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	var inside uint64
	if err := netnsexec.Run("/run/netns/"+name, func() { inside = nsOf(t, "/proc/thread-self/ns/net") }); err != nil {
		t.Fatal(err)
	}
	want := nsOf(t, "/run/netns/"+name)
	here, after := nsOf(t, "/proc/self/ns/net"), nsOf(t, "/proc/thread-self/ns/net")
	if inside != want || after != here {
		t.Fatalf("namespace inside %d (want %d), the process's %d, after %d", inside, want, here, after)
	}
	ran := false
	if err := netnsexec.Run("/run/netns/no-such-"+name, func() { ran = true }); err == nil || ran {
		t.Fatalf("a missing namespace: %v, fn ran %v", err, ran)
	}
}
