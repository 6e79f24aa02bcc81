// Package netnsexec runs code inside another network namespace on the calling goroutine's
// thread: the sockets, BPF iterators and netlink calls it makes are that namespace's.
package netnsexec

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Run locks the goroutine to its thread, moves the thread into the network namespace at
// path (a bind-mounted namespace such as /run/netns/NAME, or /proc/PID/ns/net), runs fn and
// moves the thread back. When the thread cannot return, it stays locked, so it exits with its
// goroutine instead of running other goroutines in the wrong namespace, and Run reports it
// (fn has run).
func Run(path string, fn func()) error {
	runtime.LockOSThread()
	self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("this thread's network namespace: %w", err)
	}
	defer unix.Close(self)
	target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("network namespace %s: %w", path, err)
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter network namespace %s: %w", path, err)
	}
	fn()
	if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("return from network namespace %s (the thread stays locked): %w", path, err)
	}
	runtime.UnlockOSThread()
	return nil
}
