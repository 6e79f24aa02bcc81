package qemuvm

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

// The archive unpacks with a real cpio (busybox's, which reads newc like the kernel does)
// into the same tree: contents, modes, symlinks and implied parent directories.
func TestInitramfsUnpacksWithCpio(t *testing.T) {
	if _, err := os.Stat(busybox); err != nil {
		t.Skip("static busybox not installed (bash .ci/deps/vm.sh)")
	}
	src := filepath.Join(t.TempDir(), "big")
	big := bytes.Repeat([]byte("0123456789abcdef"), 100_003) // not a multiple of 4
	if err := os.WriteFile(src, big, 0o750); err != nil {
		t.Fatal(err)
	}
	r := NewInitramfs()
	r.File("/init", 0o755, []byte("#!/bin/sh\n"))
	r.File("/etc/odd", 0o600, []byte("abc"))
	r.File("/etc/empty", 0o644, nil)
	r.Symlink("/var/run", "/run")
	r.Dir("/proc")
	if err := r.Copy("/usr/local/bin/big", src); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "a.cpio")
	if err := r.Write(archive); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(busybox, "cpio", "-i", "-d", "-F", archive)
	cmd.Dir = out
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v: %s", err, b)
	}
	check := func(p string, mode os.FileMode, want []byte) {
		t.Helper()
		st, err := os.Lstat(filepath.Join(out, p))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != mode {
			t.Errorf("%s: mode %v, want %v", p, st.Mode(), mode)
		}
		if want != nil {
			got, _ := os.ReadFile(filepath.Join(out, p))
			if !bytes.Equal(got, want) {
				t.Errorf("%s: %d bytes differ from the %d written", p, len(got), len(want))
			}
		}
	}
	check("init", 0o755, []byte("#!/bin/sh\n"))
	check("etc/odd", 0o600, []byte("abc"))
	check("etc/empty", 0o644, []byte{})
	check("usr/local/bin/big", 0o750, big)
	check("usr/local", os.ModeDir|0o755, nil)
	check("proc", os.ModeDir|0o755, nil)
	if target, err := os.Readlink(filepath.Join(out, "var/run")); err != nil || target != "/run" {
		t.Errorf("var/run -> %q (%v), want /run", target, err)
	}
}

// Copying a host file that is not there fails at once, naming nothing in the image.
func TestInitramfsCopyOfAMissingFile(t *testing.T) {
	r := NewInitramfs()
	if err := r.Copy("/missing", filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Fatal("Copy of a missing file succeeded")
	}
	if len(r.files) != 0 {
		t.Fatalf("image holds %v after a failed Copy", r.files)
	}
}

// Modules resolves dependencies from modules.dep, and soft "pre:" dependencies through their
// aliases, and orders them so each loads after what it needs; an unknown name is an error
// naming it.
func TestModulesDependencyOrder(t *testing.T) {
	dir := t.TempDir()
	dep := "kernel/net/a.ko: kernel/net/b.ko kernel/lib/c.ko\nkernel/net/b.ko: kernel/lib/c.ko\nkernel/lib/c.ko:\nkernel/fs/d-e.ko:\nkernel/crypto/impl_generic.ko:\n"
	if err := os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(dep), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "modules.softdep"), []byte("# comment\nsoftdep c pre: impl post: other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "modules.alias"), []byte("alias impl impl_generic\nalias impl impl_fast_missing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte("kernel/net/builtin.ko\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"kernel/net/a.ko", "kernel/net/b.ko", "kernel/lib/c.ko", "kernel/fs/d-e.ko", "kernel/crypto/impl_generic.ko"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := NewInitramfs()
	order, err := r.Modules(dir, "9.9", "a", "d_e", "builtin", "b")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kernel/crypto/impl_generic.ko", "kernel/lib/c.ko", "kernel/net/b.ko", "kernel/net/a.ko", "kernel/fs/d-e.ko"}
	if !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	if _, ok := r.files["/lib/modules/9.9/kernel/lib/c.ko"]; !ok {
		t.Fatal("dependency c.ko not added to the image")
	}
	if _, err := r.Modules(dir, "9.9", "nosuch"); err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Fatalf("unknown module: err %v", err)
	}
}

// The installed kernel boots a busybox initramfs under TCG and runs its /init.
func TestBootBusybox(t *testing.T) {
	if os.Getenv("SKIFF_E2E_VM") != "1" {
		t.Skip("boots a VM: runs only with SKIFF_E2E_VM=1")
	}
	if why := Missing(); why != "" {
		t.Skip(why)
	}
	k, err := FindKernel()
	if err != nil {
		t.Skip(err)
	}
	r, err := NewBusybox()
	if err != nil {
		t.Fatal(err)
	}
	r.File("/init", 0o755, []byte("#!/bin/busybox sh\n/bin/busybox mount -t proc proc /proc\n"+
		"/bin/busybox echo \"hello from $(/bin/busybox uname -r) at $(/bin/busybox cut -d' ' -f1 /proc/uptime)s\"\n/bin/busybox poweroff -f\n"))
	dir := t.TempDir()
	initrd := filepath.Join(dir, "initrd")
	if err := r.Write(initrd); err != nil {
		t.Fatal(err)
	}
	h, err := NewHostNet()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	tap, mac, err := h.Tap(1)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	vm, err := Start(Config{Kernel: k.Image, Initrd: initrd, Tap: tap, MAC: mac, MemoryMB: 256, Cmdline: "quiet", Log: filepath.Join(dir, "console.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Kill()
	want := "hello from " + k.Version
	testutil.Eventually(t, 2*time.Minute, 100*time.Millisecond, func() error {
		if vm.Contains(want) {
			return nil
		}
		if vm.Exited() {
			t.Fatalf("VM ended without %q on the console:\n%s", want, vm.Tail(40))
		}
		return fmt.Errorf("no %q on the console yet", want)
	})
	t.Logf("booted to /init in %v", time.Since(start).Round(time.Millisecond))
}
