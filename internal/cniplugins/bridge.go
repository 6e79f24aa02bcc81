package cniplugins

import (
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/utils"
	"github.com/vishvananda/netlink"
)

// bridge: a veth pair from the sandbox to a node bridge, addresses from the IPAM plugin, the
// bridge as the pods' gateway and masquerade of their egress.
var bridgeFuncs = skel.CNIFuncs{Add: bridgeAdd, Del: bridgeDel, Check: bridgeCheck}

type bridgeConf struct {
	types.PluginConf
	Bridge      string `json:"bridge"`
	IsGateway   bool   `json:"isGateway"`
	IPMasq      bool   `json:"ipMasq"`
	HairpinMode bool   `json:"hairpinMode"`
	MTU         int    `json:"mtu"`
}

func loadBridge(stdin []byte) (*bridgeConf, error) {
	c := &bridgeConf{Bridge: "cni0"}
	if err := parse(stdin, c, "bridge", "isGateway", "ipMasq", "hairpinMode", "mtu"); err != nil {
		return nil, err
	}
	if c.IPAM.Type == "" {
		return nil, errors.New("bridge: ipam.type is required")
	}
	return c, nil
}

func bridgeAdd(args *skel.CmdArgs) error {
	c, err := loadBridge(args.StdinData)
	if err != nil {
		return err
	}
	br, err := ensureBridge(c.Bridge, c.MTU)
	if err != nil {
		return err
	}
	netns, err := ns.GetNS(args.Netns)
	if err != nil {
		return fmt.Errorf("netns %q: %w", args.Netns, err)
	}
	defer netns.Close()
	hostIf, contIf, err := vethToBridge(netns, args.IfName, c, br)
	if err != nil {
		return err
	}
	r, err := ipam.ExecAdd(c.IPAM.Type, args.StdinData)
	if err != nil {
		return err
	}
	// Undo the address on any later failure, as the pod is then not made.
	ok := false
	defer func() {
		if !ok {
			_ = ipam.ExecDel(c.IPAM.Type, args.StdinData)
		}
	}()
	res, err := current.NewResultFromResult(r)
	if err != nil {
		return err
	}
	if len(res.IPs) == 0 {
		return errors.New("bridge: the IPAM plugin returned no address")
	}
	res.Interfaces = []*current.Interface{
		{Name: br.Attrs().Name, Mac: br.Attrs().HardwareAddr.String()},
		{Name: hostIf.Name, Mac: hostIf.HardwareAddr.String()},
		{Name: contIf.Name, Mac: contIf.HardwareAddr.String(), Sandbox: args.Netns},
	}
	for _, ipc := range res.IPs {
		ipc.Interface = current.Int(2)
		if ipc.Gateway == nil && c.IsGateway {
			ipc.Gateway = ip.NextIP(ip.Network(&ipc.Address).IP)
		}
	}
	if err := netns.Do(func(ns.NetNS) error { return ipam.ConfigureIface(args.IfName, res) }); err != nil {
		return err
	}
	if c.IsGateway {
		if err := gatewayOn(br, res.IPs); err != nil {
			return err
		}
	}
	if c.IPMasq {
		if err := ip.SetupIPMasqForNetworks(masqBackend(), ipNets(res.IPs), c.Name, args.IfName, args.ContainerID); err != nil {
			return err
		}
	}
	ok = true
	return types.PrintResult(res, c.CNIVersion)
}

func bridgeDel(args *skel.CmdArgs) error {
	c, err := loadBridge(args.StdinData)
	if err != nil {
		return err
	}
	if err := ipam.ExecDel(c.IPAM.Type, args.StdinData); err != nil {
		return err
	}
	if args.Netns == "" {
		return nil
	}
	var addrs []*net.IPNet
	err = ns.WithNetNSPath(args.Netns, func(ns.NetNS) error {
		var err error
		addrs, err = ip.DelLinkByNameAddr(args.IfName)
		if errors.Is(err, ip.ErrLinkNotFound) {
			return nil
		}
		return err
	})
	if _, gone := err.(ns.NSPathNotExistErr); err != nil && !gone {
		return err
	}
	if c.IPMasq && len(addrs) > 0 {
		return ip.TeardownIPMasqForNetworks(addrs, c.Name, args.IfName, args.ContainerID)
	}
	return nil
}

func bridgeCheck(args *skel.CmdArgs) error {
	c, err := loadBridge(args.StdinData)
	if err != nil {
		return err
	}
	if _, err := netlinksafe.LinkByName(c.Bridge); err != nil {
		return fmt.Errorf("bridge %s: %w", c.Bridge, err)
	}
	return ns.WithNetNSPath(args.Netns, func(ns.NetNS) error {
		_, err := netlinksafe.LinkByName(args.IfName)
		return err
	})
}

// ensureBridge finds or makes the node bridge, up.
func ensureBridge(name string, mtu int) (netlink.Link, error) {
	br, err := netlinksafe.LinkByName(name)
	if err != nil {
		la := netlink.NewLinkAttrs()
		la.Name, la.MTU = name, mtu
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: la}); err != nil && !errors.Is(err, errExist) {
			return nil, fmt.Errorf("bridge %s: %w", name, err)
		}
		if br, err = netlinksafe.LinkByName(name); err != nil {
			return nil, err
		}
	}
	if _, ok := br.(*netlink.Bridge); !ok {
		return nil, fmt.Errorf("%s exists and is not a bridge", name)
	}
	return br, netlink.LinkSetUp(br)
}

// vethToBridge makes the sandbox's ifName and its host peer, attached to br.
func vethToBridge(netns ns.NetNS, ifName string, c *bridgeConf, br netlink.Link) (host, cont net.Interface, err error) {
	mtu := c.MTU
	if mtu == 0 {
		mtu = br.Attrs().MTU
	}
	err = netns.Do(func(hostNS ns.NetNS) error {
		host, cont, err = ip.SetupVeth(ifName, mtu, "", hostNS)
		return err
	})
	if err != nil {
		return host, cont, err
	}
	link, err := netlinksafe.LinkByName(host.Name)
	if err != nil {
		return host, cont, err
	}
	if err := netlink.LinkSetMaster(link, br); err != nil {
		return host, cont, fmt.Errorf("attach %s to %s: %w", host.Name, br.Attrs().Name, err)
	}
	if c.HairpinMode {
		if err := netlink.LinkSetHairpin(link, true); err != nil {
			return host, cont, err
		}
	}
	return host, cont, nil
}

// gatewayOn gives the bridge each subnet's gateway address and turns on forwarding.
func gatewayOn(br netlink.Link, ips []*current.IPConfig) error {
	have, err := netlinksafe.AddrList(br, netlink.FAMILY_ALL)
	if err != nil {
		return err
	}
	for _, ipc := range ips {
		gw := &net.IPNet{IP: ipc.Gateway, Mask: ipc.Address.Mask}
		found := false
		for _, a := range have {
			found = found || a.IPNet.String() == gw.String()
		}
		if !found {
			if err := netlink.AddrAdd(br, &netlink.Addr{IPNet: gw}); err != nil && !errors.Is(err, errExist) {
				return fmt.Errorf("gateway %s on %s: %w", gw, br.Attrs().Name, err)
			}
		}
	}
	return ip.EnableForward(ips)
}

func ipNets(ips []*current.IPConfig) []*net.IPNet {
	out := make([]*net.IPNet, 0, len(ips))
	for _, ipc := range ips {
		out = append(out, &ipc.Address)
	}
	return out
}

func masqBackend() *string {
	b := "iptables"
	if !utils.SupportsIPTables() {
		b = "nftables"
	}
	return &b
}
