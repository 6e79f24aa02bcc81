package cniplugins

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/utils"
	"github.com/coreos/go-iptables/iptables"
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
	res, err := prevResult(&c.PluginConf)
	if err != nil {
		return err
	}
	ipt, err := iptables.New()
	if err != nil {
		return err
	}
	if err := utils.EnsureChain(ipt, "filter", forwardChain); err != nil {
		return err
	}
	if err := utils.InsertUnique(ipt, "filter", "FORWARD", true, []string{"-j", forwardChain}); err != nil {
		return err
	}
	if pod := podIPv4(res); pod != nil {
		for _, rule := range forwardRules(c, args.ContainerID, pod.String()) {
			if err := utils.InsertUnique(ipt, "filter", forwardChain, false, rule); err != nil {
				return err
			}
		}
	}
	return types.PrintResult(res, c.CNIVersion)
}

func firewallDel(args *skel.CmdArgs) error {
	c, err := loadFirewall(args.StdinData)
	if err != nil {
		return err
	}
	if c.RawPrevResult == nil {
		return nil // nothing was added, or the result is lost: nothing to find the rules by
	}
	res, err := prevResult(&c.PluginConf)
	if err != nil {
		return err
	}
	pod := podIPv4(res)
	if pod == nil {
		return nil
	}
	ipt, err := iptables.New()
	if err != nil {
		return err
	}
	for _, rule := range forwardRules(c, args.ContainerID, pod.String()) {
		if err := utils.DeleteRule(ipt, "filter", forwardChain, rule...); err != nil {
			return err
		}
	}
	return nil
}

func firewallCheck(args *skel.CmdArgs) error {
	c, err := loadFirewall(args.StdinData)
	if err != nil {
		return err
	}
	res, err := prevResult(&c.PluginConf)
	if err != nil {
		return err
	}
	ipt, err := iptables.New()
	if err != nil {
		return err
	}
	if pod := podIPv4(res); pod != nil {
		for _, rule := range forwardRules(c, args.ContainerID, pod.String()) {
			if ok, err := ipt.Exists("filter", forwardChain, rule...); err != nil || !ok {
				return fmt.Errorf("firewall: rule %v missing (%v)", rule, err)
			}
		}
	}
	return nil
}
