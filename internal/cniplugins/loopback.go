package cniplugins

import (
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// loopback: the sandbox's lo up.
var loopbackFuncs = skel.CNIFuncs{Add: loopbackAdd, Del: loopbackDel, Check: loopbackCheck}

func loopbackAdd(args *skel.CmdArgs) error {
	var conf types.PluginConf
	if err := parse(args.StdinData, &conf); err != nil {
		return err
	}
	if err := ns.WithNetNSPath(args.Netns, func(ns.NetNS) error { return setLoUp(true) }); err != nil {
		return err
	}
	zero := 0
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{Name: "lo", Sandbox: args.Netns}},
		IPs:        []*current.IPConfig{{Interface: &zero, Address: net.IPNet{IP: net.IPv4(127, 0, 0, 1), Mask: net.CIDRMask(8, 32)}}}}
	return types.PrintResult(res, conf.CNIVersion)
}

func loopbackDel(args *skel.CmdArgs) error {
	if args.Netns == "" {
		return nil
	}
	err := ns.WithNetNSPath(args.Netns, func(ns.NetNS) error { return setLoUp(false) })
	if _, gone := err.(ns.NSPathNotExistErr); gone {
		return nil
	}
	return err
}

func loopbackCheck(args *skel.CmdArgs) error {
	return ns.WithNetNSPath(args.Netns, func(ns.NetNS) error {
		lo, err := netlinksafe.LinkByName("lo")
		if err != nil {
			return err
		}
		if lo.Attrs().Flags&net.FlagUp == 0 {
			return types.NewError(types.ErrInternal, "lo is down", "")
		}
		return nil
	})
}

func setLoUp(up bool) error {
	lo, err := netlinksafe.LinkByName("lo")
	if err != nil {
		return err
	}
	if up {
		return netlink.LinkSetUp(lo)
	}
	return netlink.LinkSetDown(lo)
}
