package cgrouptest

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A node's cgroup subtree: runc places a container at the absolute cgroupsPath the runtime
// gives it, /<containerd namespace>/pod<hash>/<id>, in every hierarchy (on a hybrid v1 host
// also in the unified one). A node with its own containerd namespace therefore owns
// /<namespace> in the cgroup2 hierarchy: its agent runs in /<namespace>/agent (containerd and
// the shims inherit it), its pods land in /<namespace>/pod*, and its Service hooks are
// attached at /<namespace> (--cgroup-root).

// HostHierarchy is the host's cgroup2 hierarchy (the unified one of a hybrid host), or "".
func HostHierarchy() string {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[2] == "cgroup2" {
			return f[1]
		}
	}
	return ""
}

// Procs lists every process in a cgroup2 subtree.
func Procs(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// KillAll kills every process of a cgroup2 subtree and waits (up to 15 s) until it is empty.
func KillAll(dir string) {
	if _, err := os.Stat(dir); err != nil {
		return
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(Procs(dir)) > 0 && time.Now().Before(deadline) {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
			for _, pid := range Procs(dir) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(50 * time.Millisecond) // the kernel reaps asynchronously; nothing to wait on
	}
}

// RemoveNode kills what still runs in the node subtree /<namespace> of the cgroup2 hierarchy
// and removes /<namespace> in every hierarchy (each v1 controller's too). A cgroup whose last
// task just died stays busy for a moment, so removal is retried for a few seconds.
func RemoveNode(hierarchy, namespace string) error {
	roots := []string{hierarchy}
	if v1, err := os.ReadDir("/sys/fs/cgroup"); err == nil && hierarchy != "/sys/fs/cgroup" {
		for _, e := range v1 {
			if p := filepath.Join("/sys/fs/cgroup", e.Name()); e.IsDir() && p != hierarchy {
				roots = append(roots, p)
			}
		}
	}
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		KillAll(filepath.Join(hierarchy, namespace))
		var errs []error
		for _, r := range roots {
			errs = append(errs, rmdirTree(filepath.Join(r, namespace)))
		}
		if err = errors.Join(errs...); err == nil {
			return nil
		}
	}
	return err
}

// rmdirTree removes a cgroup directory bottom-up (cgroupfs allows only rmdir of empty groups).
func rmdirTree(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	var errs []error
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// MountsUnder lists the mount points below dir, deepest first (what a killed containerd left).
func MountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}

// Teardown removes what a node agent left on the host: every process of its subtree /<namespace>
// (agent, containerd, shims, pods), the mounts under its data dir (rootfs, pinned pod netns),
// its pinned Service hooks and maps (unpinning a link detaches it), and its cgroups.
func Teardown(t testing.TB, hierarchy, namespace, dataDir string, pinDirs ...string) {
	t.Helper()
	KillAll(filepath.Join(hierarchy, namespace))
	for _, m := range MountsUnder(dataDir) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			t.Logf("unmount %s: %v", m, err)
		}
	}
	for _, d := range pinDirs {
		_ = os.RemoveAll(d)
	}
	if err := RemoveNode(hierarchy, namespace); err != nil {
		t.Errorf("remove cgroups of %s: %v", namespace, err)
	}
}
