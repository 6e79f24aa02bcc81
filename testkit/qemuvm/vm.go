// Package qemuvm boots Linux VMs for end-to-end tests: it builds an initramfs (busybox, kernel
// modules, any host binaries with their libraries) and runs it under qemu with TCG, one tap
// device per VM on a host bridge, the serial console in a log file.
package qemuvm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Kernel is a bootable kernel image with its modules directory.
type Kernel struct {
	Image   string // vmlinuz
	Version string // uname -r inside the VM
	Modules string // /lib/modules/<Version> on the host
}

// FindKernel picks the newest /boot/vmlinuz-<ver> whose /lib/modules/<ver> is installed
// (Debian's linux-image-amd64 provides both).
func FindKernel() (Kernel, error) {
	images, _ := filepath.Glob("/boot/vmlinuz-*")
	sort.Sort(sort.Reverse(sort.StringSlice(images)))
	for _, img := range images {
		ver := strings.TrimPrefix(filepath.Base(img), "vmlinuz-")
		mods := filepath.Join("/lib/modules", ver)
		if _, err := os.Stat(filepath.Join(mods, "modules.dep")); err == nil {
			return Kernel{Image: img, Version: ver, Modules: mods}, nil
		}
	}
	return Kernel{}, errors.New("no /boot/vmlinuz-* with matching /lib/modules (apt-get install linux-image-amd64)")
}

// Missing reports what this machine lacks to boot VMs ("" when nothing).
func Missing() string {
	if os.Geteuid() != 0 {
		return "booting VMs on tap devices needs root"
	}
	for _, bin := range []string{"qemu-system-x86_64", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " not installed (bash .ci/deps/vm.sh installs it)"
		}
	}
	if _, err := os.Stat(busybox); err != nil {
		return "static busybox not installed (bash .ci/deps/vm.sh installs busybox-static)"
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return "no /dev/net/tun for tap devices"
	}
	if _, err := FindKernel(); err != nil {
		return err.Error()
	}
	return ""
}

// Config is one VM.
type Config struct {
	Kernel   string
	Initrd   string
	Cmdline  string // appended after the console settings
	Tap      string // host tap device for the VM's eth0
	MAC      string
	MemoryMB int    // default 1024
	CPUs     int    // default 1
	Log      string // serial console output
	// Disk is a raw image the VM sees as /dev/vda (virtio), "" for none. Its cache mode is
	// writeback: what the guest flushed is on the host (qemu syncs it), what it had only in
	// its own page cache is lost when qemu is killed, as in a power cut.
	Disk string
}

// VM is a running qemu process.
type VM struct {
	Log     string
	Started time.Time
	cmd     *exec.Cmd
	done    chan struct{}
	once    sync.Once
}

// Start runs qemu in the background; TCG because KVM is not usable everywhere the suite runs.
func Start(cfg Config) (*VM, error) {
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB = 1024
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = 1
	}
	args := []string{
		"-accel", "tcg", "-m", fmt.Sprint(cfg.MemoryMB), "-smp", fmt.Sprint(cfg.CPUs),
		"-nographic", "-monitor", "none", "-serial", "file:" + cfg.Log, "-no-reboot",
		"-kernel", cfg.Kernel, "-initrd", cfg.Initrd,
		// panic=-1 with -no-reboot: a kernel panic ends qemu instead of hanging the test.
		"-append", "console=ttyS0 panic=-1 " + cfg.Cmdline,
		"-netdev", "tap,id=n0,ifname=" + cfg.Tap + ",script=no,downscript=no",
		// romfile=: no iPXE option ROM, the kernel is booted directly.
		"-device", "virtio-net-pci,netdev=n0,romfile=,mac=" + cfg.MAC,
		"-device", "virtio-rng-pci",
	}
	if cfg.Disk != "" {
		args = append(args, "-drive", "file="+cfg.Disk+",format=raw,if=virtio,cache=writeback")
	}
	cmd := exec.Command("qemu-system-x86_64", args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	// A test process that dies (timeout, ^C) takes its VMs with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	vm := &VM{Log: cfg.Log, cmd: cmd, done: make(chan struct{}), Started: time.Now()}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = cmd.Wait()
		if s := strings.TrimSpace(out.String()); s != "" {
			f, err := os.OpenFile(cfg.Log, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
			if err == nil {
				fmt.Fprintf(f, "\n[qemu] %s\n", s)
				f.Close()
			}
		}
		close(vm.done)
	}()
	return vm, nil
}

// Exited reports whether qemu has ended.
func (v *VM) Exited() bool {
	select {
	case <-v.done:
		return true
	default:
		return false
	}
}

// Kill ends the VM at once, like pulling its power, and waits for qemu to exit.
func (v *VM) Kill() {
	v.once.Do(func() { _ = v.cmd.Process.Kill() })
	<-v.done
}

// Contains reports whether the console log holds s.
func (v *VM) Contains(s string) bool {
	b, _ := os.ReadFile(v.Log)
	return strings.Contains(string(b), s)
}

// Tail is the last n lines of the console log.
func (v *VM) Tail(n int) string {
	b, err := os.ReadFile(v.Log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
