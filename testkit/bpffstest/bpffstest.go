// Package bpffstest gives a test its own bpffs to pin eBPF maps and links in.
package bpffstest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/testkit/needs"
)

// Mount mounts a bpffs in a temporary directory, unmounted when the test ends; without root
// (or when bpffs cannot be mounted) the test skips, or fails under SKIFF_TEST_NO_SKIP=1.
func Mount(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		needs.Skip(t, "needs root for eBPF and bpffs")
	}
	root := t.TempDir()
	if err := unix.Mount("bpf", root, "bpf", 0, ""); err != nil {
		needs.Skipf(t, "cannot mount bpffs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(root, unix.MNT_DETACH) })
	return root
}

// PinDir is a node's pin directory in a fresh bpffs (Mount), not yet made: where a dataplane's
// Load pins its maps and links.
func PinDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(Mount(t), "node")
}
