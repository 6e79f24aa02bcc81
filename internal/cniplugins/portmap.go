package cniplugins

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/utils"
)

// portmap: hostPorts, as DNAT rules from the node's local addresses to the pod (iptables nat,
// PREROUTING for traffic from elsewhere, OUTPUT for the node's own); not on 127.0.0.0/8.
var portmapFuncs = skel.CNIFuncs{Add: portmapAdd, Del: portmapDel, Check: portmapCheck}

// hostPortChain holds one DNAT rule per mapping, each tagged with its container.
const hostPortChain = "SKIFF-HOSTPORTS"

type portMapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

type portmapConf struct {
	types.PluginConf
	RuntimeConfig struct {
		PortMappings []portMapping `json:"portMappings,omitempty"`
	} `json:"runtimeConfig,omitempty"`
}

func loadPortmap(stdin []byte) (*portmapConf, error) {
	c := &portmapConf{}
	if err := parse(stdin, c); err != nil {
		return nil, err
	}
	for i, m := range c.RuntimeConfig.PortMappings {
		if m.HostPort < 1 || m.HostPort > 65535 || m.ContainerPort < 1 || m.ContainerPort > 65535 {
			return nil, fmt.Errorf("runtimeConfig.portMappings[%d]: ports must be 1-65535", i)
		}
		switch strings.ToLower(m.Protocol) {
		case "", "tcp", "udp", "sctp":
		default:
			return nil, fmt.Errorf("runtimeConfig.portMappings[%d].protocol: %q is not tcp, udp or sctp", i, m.Protocol)
		}
		if strings.Contains(m.HostIP, ":") {
			return nil, fmt.Errorf("runtimeConfig.portMappings[%d].hostIP: IPv6 is not supported by skiff's portmap", i)
		}
		if ip := net.ParseIP(m.HostIP); ip != nil && ip.IsLoopback() {
			return nil, fmt.Errorf("runtimeConfig.portMappings[%d].hostIP: loopback addresses are not supported by skiff's portmap", i)
		}
	}
	return c, nil
}

func dnatRules(c *portmapConf, containerID, podIP string) [][]string {
	var rules [][]string
	for _, m := range c.RuntimeConfig.PortMappings {
		proto := strings.ToLower(m.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		r := []string{"-p", proto, "--dport", strconv.Itoa(m.HostPort)}
		if m.HostIP != "" && m.HostIP != "0.0.0.0" {
			r = append(r, "-d", m.HostIP)
		}
		r = append(r, "-m", "comment", "--comment", comment(c.Name, containerID),
			"-j", "DNAT", "--to-destination", podIP+":"+strconv.Itoa(m.ContainerPort))
		rules = append(rules, r)
	}
	return rules
}

func portmapAdd(args *skel.CmdArgs) error {
	c, err := loadPortmap(args.StdinData)
	if err != nil {
		return err
	}
	res, ipt, rules, err := podRules(&c.PluginConf, func(pod string) [][]string { return dnatRules(c, args.ContainerID, pod) })
	if err != nil {
		return err
	}
	if len(c.RuntimeConfig.PortMappings) > 0 && podIPv4(res) == nil {
		return fmt.Errorf("portmap: the pod has no IPv4 address to map hostPorts to")
	}
	if ipt != nil {
		if err := utils.EnsureChain(ipt, "nat", hostPortChain); err != nil {
			return err
		}
		// Not the node's loopback addresses: a pod cannot answer a 127.0.0.0/8 source.
		jump := []string{"!", "-d", "127.0.0.0/8", "-m", "addrtype", "--dst-type", "LOCAL", "-j", hostPortChain}
		for _, from := range []string{"PREROUTING", "OUTPUT"} {
			if err := utils.InsertUnique(ipt, "nat", from, true, jump); err != nil {
				return err
			}
		}
		if err := appendRules(ipt, "nat", hostPortChain, rules); err != nil {
			return err
		}
	}
	return types.PrintResult(res, c.CNIVersion)
}

func portmapDel(args *skel.CmdArgs) error {
	c, err := loadPortmap(args.StdinData)
	if err != nil || len(c.RuntimeConfig.PortMappings) == 0 || c.RawPrevResult == nil {
		return err
	}
	_, ipt, rules, err := podRules(&c.PluginConf, func(pod string) [][]string { return dnatRules(c, args.ContainerID, pod) })
	if err != nil || ipt == nil {
		return err
	}
	return deleteRules(ipt, "nat", hostPortChain, rules)
}

func portmapCheck(args *skel.CmdArgs) error {
	c, err := loadPortmap(args.StdinData)
	if err != nil {
		return err
	}
	_, ipt, rules, err := podRules(&c.PluginConf, func(pod string) [][]string { return dnatRules(c, args.ContainerID, pod) })
	if err != nil || ipt == nil {
		return err
	}
	return checkRules(ipt, "nat", hostPortChain, rules)
}
