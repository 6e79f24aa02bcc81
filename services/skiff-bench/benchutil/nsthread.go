package benchutil

import (
	"fmt"
	"os/exec"
	"runtime"
)

// NSThread is one OS thread living in a network namespace of its own. Work that must see that
// namespace (sockets, children such as iptables-restore, which inherit the forking thread's
// namespace) runs on it through Do. The thread is never unlocked: when Close ends its
// goroutine, the thread exits, so no other goroutine ever runs in the namespace.
type NSThread struct {
	work chan func()
}

// NewNSThread starts the thread and has it call enter (unshare a new namespace, or set a
// named one) before any work.
func NewNSThread(enter func() error) (*NSThread, error) {
	t := &NSThread{work: make(chan func())}
	ready := make(chan error)
	go func() {
		runtime.LockOSThread()
		if err := enter(); err != nil {
			ready <- err
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
	return t, nil
}

// Do runs f on the thread and returns its error.
func (t *NSThread) Do(f func() error) error {
	errc := make(chan error, 1)
	t.work <- func() { errc <- f() }
	return <-errc
}

// Close ends the thread.
func (t *NSThread) Close() { close(t.work) }

// Run runs a command, its output in the error.
func Run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %v: %w: %s", name, args, err, out)
	}
	return nil
}
