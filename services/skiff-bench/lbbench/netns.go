package lbbench

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// nsThread is one OS thread living in a private network namespace. Work
// that must see that namespace (sockets, iptables-restore children, which
// inherit the forking thread's namespace) runs on it through do. The host's
// namespace is never modified.
type nsThread struct {
	work chan func()
}

func newNetns() (*nsThread, error) {
	t := &nsThread{work: make(chan func())}
	ready := make(chan error)
	go func() {
		// Never unlocked: when the goroutine ends the thread exits and
		// takes the namespace with it.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ready <- fmt.Errorf("unshare netns: %w", err)
			return
		}
		ready <- nil
		for f := range t.work {
			f()
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	// Loopback for the backends, and a route for the ClusterIP range so
	// connect() gets as far as the iptables OUTPUT hook.
	err := t.do(func() error {
		if err := run("ip", "link", "set", "lo", "up"); err != nil {
			return err
		}
		return run("ip", "route", "add", vipCIDR, "dev", "lo")
	})
	if err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

func (t *nsThread) do(f func() error) error {
	errc := make(chan error, 1)
	t.work <- func() { errc <- f() }
	return <-errc
}

func (t *nsThread) close() { close(t.work) }

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %v: %w: %s", name, args, err, out)
	}
	return nil
}
