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
	attaches = metrics.Counter("skiff_netpol_attaches_total",
		"Pod veths the NetworkPolicy programs were attached to (each once: by its sandbox, or at the agent's start for the veths already there)")
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
	expiry := time.NewTimer(dataplaneWait)
	defer expiry.Stop()
	for {
		dp, err := e.dataplane(ctx, expiry.C)
		if err != nil {
			return err
		}
		err = e.attach(dp, idx)
		if errors.Is(err, policy.ErrClosed) {
			continue // its incarnation stopped meanwhile (and unpublished it): wait for the next
		}
		if err != nil {
			return fmt.Errorf("cannot attach the programs (%s mode): %w", dp.Mode(), err)
		}
		return nil
	}
}

// attach puts the programs on a veth unless they are on it already (a sandbox retried, or
// one whose veth the start's pass found), counting real attaches.
func (e *Enforcer) attach(dp *policy.Dataplane, idx int) error {
	did, err := dp.Attach(idx)
	if did {
		attaches.WithLabelValues().Inc()
		e.mu.Lock()
		e.stats.Attached++
		e.mu.Unlock()
	}
	return err
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

// dataplane returns the published dataplane, waiting until one is published or expired
// fires. The wait is on the publication's signal, so a sandbox goes on as soon as it is up.
func (e *Enforcer) dataplane(ctx context.Context, expired <-chan time.Time) (*policy.Dataplane, error) {
	for {
		e.mu.Lock()
		dp, up, loadErr := e.dp, e.upLocked(), e.loadErr
		e.mu.Unlock()
		if dp != nil {
			return dp, nil
		}
		select {
		case <-up:
		case <-expired:
			return nil, errors.Join(errors.New("the policy dataplane is not loaded"), loadErr)
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the policy dataplane: %w", ctx.Err())
		}
	}
}

// upLocked is the channel closed while a dataplane is published.
func (e *Enforcer) upLocked() chan struct{} {
	if e.up == nil {
		e.up = make(chan struct{})
	}
	return e.up
}

// publish makes dp the dataplane Protect attaches with and wakes the sandboxes waiting for it.
func (e *Enforcer) publish(dp *policy.Dataplane) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dp, e.loadErr = dp, nil
	select {
	case <-e.upLocked():
	default:
		close(e.up)
	}
	if e.stats.Mode != string(dp.Mode()) {
		e.stats.Mode = string(dp.Mode())
		attachMode.Reset()
		attachMode.WithLabelValues(e.stats.Mode).Set(1)
		e.cfg.Logger.Info("netpol: programs attach by "+e.stats.Mode, "node", e.cfg.NodeName)
	}
}

// unpublishLocked withdraws dp, if it is the published one, before its incarnation closes it:
// sandboxes wait for the next incarnation's.
func (e *Enforcer) unpublishLocked(dp *policy.Dataplane) {
	if dp != nil && e.dp == dp {
		e.dp = nil
		e.up = make(chan struct{})
	}
}
