package cniplugins

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/utils"
)

// firewall (iptables backend): the pods' forwarded traffic is accepted, ahead of a FORWARD
// policy that drops it (Docker's): what a pod sends, and the replies to what it started.
var firewallFuncs = skel.CNIFuncs{Add: firewallAdd, Del: firewallDel, Check: firewallCheck}

// forwardChain holds the pods' accept rules; FORWARD jumps to it first.
const forwardChain = "SKIFF-FORWARD"

type firewallConf struct {
	types.PluginConf
	Backend string `json:"backend"`
}

func loadFirewall(stdin []byte) (*firewallConf, error) {
	c := &firewallConf{}
	if err := parse(stdin, c, "backend"); err != nil {
		return nil, err
	}
	if c.Backend != "" && c.Backend != "iptables" {
		return nil, fmt.Errorf("firewall: backend %q is not supported by skiff's firewall (only iptables)", c.Backend)
	}
	return c, nil
}

// forwardRules are the accept rules for one pod address.
func forwardRules(c *firewallConf, containerID, podIP string) [][]string {
	tag := []string{"-m", "comment", "--comment", comment(c.Name, containerID)}
	return [][]string{
		append([]string{"-s", podIP}, append(tag, "-j", "ACCEPT")...),
		append([]string{"-d", podIP, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED"}, append(tag, "-j", "ACCEPT")...),
	}
}

func firewallAdd(args *skel.CmdArgs) error {
	c, err := loadFirewall(args.StdinData)
	if err != nil {
		return err
	}
	res, ipt, rules, err := podRules(&c.PluginConf, func(pod string) [][]string { return forwardRules(c, args.ContainerID, pod) })
	if err != nil {
		return err
	}
	if ipt != nil {
		if err := utils.EnsureChain(ipt, "filter", forwardChain); err != nil {
			return err
		}
		if err := utils.InsertUnique(ipt, "filter", "FORWARD", true, []string{"-j", forwardChain}); err != nil {
			return err
		}
		if err := appendRules(ipt, "filter", forwardChain, rules); err != nil {
			return err
		}
	}
	return types.PrintResult(res, c.CNIVersion)
}

func firewallDel(args *skel.CmdArgs) error {
	c, err := loadFirewall(args.StdinData)
	if err != nil || c.RawPrevResult == nil {
		return err // without the result nothing names the rules: none were added, or they cannot be found
	}
	_, ipt, rules, err := podRules(&c.PluginConf, func(pod string) [][]string { return forwardRules(c, args.ContainerID, pod) })
	if err != nil || ipt == nil {
		return err
	}
	return deleteRules(ipt, "filter", forwardChain, rules)
}

func firewallCheck(args *skel.CmdArgs) error {
	c, err := loadFirewall(args.StdinData)
	if err != nil {
		return err
	}
	_, ipt, rules, err := podRules(&c.PluginConf, func(pod string) [][]string { return forwardRules(c, args.ContainerID, pod) })
	if err != nil || ipt == nil {
		return err
	}
	return checkRules(ipt, "filter", forwardChain, rules)
}
