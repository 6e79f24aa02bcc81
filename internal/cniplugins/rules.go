package cniplugins

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/utils"
	"github.com/coreos/go-iptables/iptables"
)

// podRules gives a chained plugin its previous result and, when the pod has an IPv4 address,
// the iptables rules for it (rules builds them) with a handle to apply them; ipt is nil when
// there is nothing to apply.
func podRules(pc *types.PluginConf, rules func(podIP string) [][]string) (res *current.Result, ipt *iptables.IPTables, rs [][]string, err error) {
	if res, err = prevResult(pc); err != nil {
		return nil, nil, nil, err
	}
	pod := podIPv4(res)
	if pod == nil {
		return res, nil, nil, nil
	}
	if rs = rules(pod.String()); len(rs) == 0 {
		return res, nil, nil, nil
	}
	if ipt, err = iptables.New(); err != nil {
		return nil, nil, nil, err
	}
	return res, ipt, rs, nil
}

// appendRules adds each rule at the end of chain unless it is there.
func appendRules(ipt *iptables.IPTables, table, chain string, rules [][]string) error {
	for _, r := range rules {
		if err := utils.InsertUnique(ipt, table, chain, false, r); err != nil {
			return err
		}
	}
	return nil
}

// deleteRules removes each rule from chain; a missing one is no error.
func deleteRules(ipt *iptables.IPTables, table, chain string, rules [][]string) error {
	for _, r := range rules {
		if err := utils.DeleteRule(ipt, table, chain, r...); err != nil {
			return err
		}
	}
	return nil
}

// checkRules fails naming the first rule not in chain.
func checkRules(ipt *iptables.IPTables, table, chain string, rules [][]string) error {
	for _, r := range rules {
		if ok, err := ipt.Exists(table, chain, r...); err != nil || !ok {
			return fmt.Errorf("%s/%s: rule %v missing (%v)", table, chain, r, err)
		}
	}
	return nil
}
