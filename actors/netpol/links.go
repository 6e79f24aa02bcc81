package netpol

import (
	"context"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/bpf/policy"
)

// watchLinks attaches the programs to every veth enslaved to the pods' bridge, the existing
// ones and each new one as the kernel announces it (the CNI plugin enslaves a pod's veth
// before the pod's containers start), and forgets the links of veths that are gone.
func (e *Enforcer) watchLinks(ctx context.Context, dp *policy.Dataplane) {
	e.forgetGone(dp)
	updates := make(chan netlink.LinkUpdate, 256)
	done := make(chan struct{})
	defer close(done)
	errs := make(chan error, 1)
	err := netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{
		ListExisting: true,
		ErrorCallback: func(err error) {
			select {
			case errs <- err:
			default:
			}
		},
	})
	if err != nil {
		panic("netpol: subscribe to links: " + err.Error()) // the supervisor retries
	}
	attached := map[int]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case err := <-errs:
			panic("netpol: link updates: " + err.Error())
		case u, ok := <-updates:
			if !ok {
				panic("netpol: link updates ended")
			}
			e.linkChanged(dp, u, attached)
		}
	}
}

func (e *Enforcer) linkChanged(dp *policy.Dataplane, u netlink.LinkUpdate, attached map[int]bool) {
	attrs := u.Link.Attrs()
	idx := attrs.Index
	if u.Header.Type == unix.RTM_DELLINK {
		if attached[idx] {
			delete(attached, idx)
			if err := dp.Forget(idx); err != nil {
				e.cfg.Logger.Warn("netpol: forget link", "ifindex", idx, "err", err)
			}
		}
		return
	}
	if attached[idx] || u.Link.Type() != "veth" || attrs.MasterIndex == 0 {
		return
	}
	br, err := net.InterfaceByName(e.cfg.Bridge)
	if err != nil || br.Index != attrs.MasterIndex {
		return
	}
	if err := dp.Attach(idx); err != nil {
		e.cfg.Logger.Error("netpol: attach", "veth", attrs.Name, "err", err)
		return
	}
	attached[idx] = true
	e.mu.Lock()
	e.stats.Attached++
	e.mu.Unlock()
}

// forgetGone drops pinned links of interfaces that went while no enforcer ran.
func (e *Enforcer) forgetGone(dp *policy.Dataplane) {
	idxs, err := dp.Attached()
	if err != nil {
		e.cfg.Logger.Warn("netpol: pinned links", "err", err)
		return
	}
	for _, idx := range idxs {
		if _, err := net.InterfaceByIndex(idx); err != nil {
			_ = dp.Forget(idx)
		}
	}
}
