package runtime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	goruntime "runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// newNetNS creates a network namespace pinned by a bind mount at path, so it
// outlives every process in it (no pause container) and the agent itself.
func newNetNS(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return err
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it leaves with the goroutine and
		// takes the new namespace with it, so no Go code runs in it later.
		goruntime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare netns: %w", err)
			return
		}
		src := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("pin netns at %s: %w", path, err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		_ = os.Remove(path)
		return err
	}
	return nil
}

// isNetNS reports whether path is a pinned namespace (an nsfs mount).
func isNetNS(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}

// removeNetNS unpins and deletes; a missing namespace is not an error.
func removeNetNS(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// DialPod connects to TCP port on the loopback of the pod's network namespace, as the CRI's
// port-forward does, so a port bound to 127.0.0.1 in the pod is reachable too. The socket is
// made on a thread that entered the namespace; the thread is never unlocked and leaves with
// its goroutine.
func (r *Runtime) DialPod(ctx context.Context, podUID string, port int32) (net.Conn, error) {
	path := r.netnsPath(sandboxID(podUID))
	if !isNetNS(path) {
		return nil, fmt.Errorf("pod %s has no network namespace on this node", podUID)
	}
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		goruntime.LockOSThread()
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- result{err: err}
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			done <- result{err: fmt.Errorf("enter the pod's network namespace: %w", err)}
			return
		}
		// tcp4 to a literal address: no resolver or dual-stack racing on other threads.
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
		done <- result{c, err}
	}()
	res := <-done
	return res.c, res.err
}
