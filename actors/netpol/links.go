package netpol

import (
	"context"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/bpf/policy"
)

// watchLinks attaches the programs to the veths already on the pods' bridge when it starts
// (pods of an earlier agent or incarnation, switched to this incarnation's programs), then
// publishes the dataplane to Protect and from then on only drops the pins of veths that are
// deleted. A new pod's veth is Protect's alone: its sandbox owns the attach, as a Cilium
// endpoint build does, so each veth is attached once.
func (e *Enforcer) watchLinks(ctx context.Context, dp *policy.Dataplane) {
	updates := make(chan netlink.LinkUpdate, 256)
	done := make(chan struct{})
	defer close(done)
	errs := make(chan error, 1)
	// Subscribed before the first pass, so a veth deleted during it is still seen going.
	err := netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{
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
	if err := dp.Prune(); err != nil {
		e.cfg.Logger.Warn("netpol: pinned links of deleted veths", "err", err)
	}
	e.attachExisting(dp)
	e.publish(dp)
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
			// Names do not matter (pins are by ifindex); a veth leaving the node's namespace
			// is deleted here too.
			if u.Header.Type == unix.RTM_DELLINK && u.Link.Type() == "veth" {
				e.vethGone(dp, u.Link.Attrs().Index)
			}
		}
	}
}

// attachExisting attaches the programs to every veth enslaved to the pods' bridge now.
func (e *Enforcer) attachExisting(dp *policy.Dataplane) {
	br, err := net.InterfaceByName(e.cfg.Bridge)
	if err != nil {
		return // no bridge yet: no pod veths
	}
	links, err := netlink.LinkList()
	if err != nil {
		panic("netpol: list links: " + err.Error())
	}
	for _, l := range links {
		attrs := l.Attrs()
		if l.Type() != "veth" || attrs.MasterIndex != br.Index {
			continue
		}
		if err := e.attach(dp, attrs.Index); err != nil {
			e.cfg.Logger.Error("netpol: attach", "veth", attrs.Name, "err", err)
		}
	}
}

func (e *Enforcer) vethGone(dp *policy.Dataplane, idx int) {
	if err := dp.Forget(idx); err != nil {
		e.cfg.Logger.Warn("netpol: forget links", "ifindex", idx, "err", err)
	}
	e.mu.Lock()
	e.stats.VethsGone++
	e.mu.Unlock()
}
