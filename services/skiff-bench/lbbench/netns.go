package lbbench

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
)

// newNetns starts a thread in a private network namespace; the host's namespace is never
// modified.
func newNetns() (*benchutil.NSThread, error) {
	t, err := benchutil.NewNSThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare netns: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Loopback for the backends, and a route for the ClusterIP range so
	// connect() gets as far as the iptables OUTPUT hook.
	err = t.Do(func() error {
		if err := benchutil.Run("ip", "link", "set", "lo", "up"); err != nil {
			return err
		}
		return benchutil.Run("ip", "route", "add", vipCIDR, "dev", "lo")
	})
	if err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}
