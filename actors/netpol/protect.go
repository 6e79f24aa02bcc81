package netpol

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/bpf/policy"
	"github.com/skiff-sh/skiff/internal/metrics"
)

var (
	attachMode = metrics.Gauge("skiff_netpol_attach_mode",
		"1 for how this node attaches its NetworkPolicy programs: tcx (Linux 6.6+) or tc (legacy clsact filters)", "mode")
	attachFailures = metrics.Counter("skiff_netpol_attach_failures_total",
		"Pod veths the NetworkPolicy programs could not be attached to; each failed the pod's sandbox")
)

// dataplaneWait bounds how long a new pod's sandbox waits for the dataplane to be loaded (an
// agent starting); past it the sandbox fails and the kubelet retries.
const dataplaneWait = 15 * time.Second

// Protect attaches the policy programs to the host side of the veth whose other end is eth0
// in the pod network namespace at netnsPath, and returns once they are on it. The runtime
// calls it after CNI ADD: an error fails the pod's sandbox as a failed CNI ADD does (the
// kubelet records FailedCreatePodSandBox and retries), so no pod runs without the programs,
// as a Cilium endpoint whose programs fail to load fails its CNI ADD.
func (e *Enforcer) Protect(ctx context.Context, netnsPath string) error {
	err := e.protect(ctx, netnsPath)
	if err != nil {
		attachFailures.WithLabelValues().Inc()
		e.mu.Lock()
		e.stats.AttachFailures++
		e.mu.Unlock()
		e.cfg.Logger.Error("netpol: pod left without NetworkPolicy programs; its sandbox fails", "netns", netnsPath, "err", err)
		return fmt.Errorf("NetworkPolicy enforcement: %w", err)
	}
	return nil
}

func (e *Enforcer) protect(ctx context.Context, netnsPath string) error {
	idx, err := hostVeth(netnsPath)
	if err != nil {
		return err
	}
	dp, err := e.dataplane(ctx)
	if err != nil {
		return err
	}
	if err := dp.Attach(idx); err != nil {
		return fmt.Errorf("cannot attach the programs (%s mode): %w", dp.Mode(), err)
	}
	return nil
}

// hostVeth is the ifindex, in this namespace, of the peer of the pod's eth0.
func hostVeth(netnsPath string) (int, error) {
	ns, err := netns.GetFromPath(netnsPath)
	if err != nil {
		return 0, fmt.Errorf("pod network namespace: %w", err)
	}
	defer ns.Close()
	// Route netlink only: a handle for every family fails on a kernel without XFRM.
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return 0, fmt.Errorf("pod network namespace: %w", err)
	}
	defer h.Close()
	l, err := h.LinkByName("eth0")
	if err != nil {
		return 0, fmt.Errorf("pod interface eth0: %w", err)
	}
	if l.Type() != "veth" || l.Attrs().ParentIndex == 0 {
		return 0, fmt.Errorf("pod interface eth0 is a %s without a host-side peer: policies cannot be enforced on it", l.Type())
	}
	return l.Attrs().ParentIndex, nil
}

// dataplane waits for the running incarnation's dataplane.
func (e *Enforcer) dataplane(ctx context.Context) (*policy.Dataplane, error) {
	deadline := time.Now().Add(dataplaneWait)
	for {
		e.mu.Lock()
		dp, loadErr := e.dp, e.loadErr
		e.mu.Unlock()
		if dp != nil {
			return dp, nil
		}
		if time.Now().After(deadline) {
			return nil, errors.Join(errors.New("the policy dataplane is not loaded"), loadErr)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the policy dataplane: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// loaded publishes an incarnation's dataplane (nil when it stops) and its mode.
func (e *Enforcer) loaded(dp *policy.Dataplane, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dp, e.loadErr = dp, err
	if dp != nil && e.stats.Mode != string(dp.Mode()) {
		e.stats.Mode = string(dp.Mode())
		attachMode.Reset()
		attachMode.WithLabelValues(e.stats.Mode).Set(1)
		e.cfg.Logger.Info("netpol: programs attach by "+e.stats.Mode, "node", e.cfg.NodeName)
	}
}
