// Package hostbridge creates the host bridges that test clusters (network namespaces, VMs) put
// their nodes on.
package hostbridge

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Create adds bridge with addr (CIDR notation) and brings it up; remove deletes it and undoes
// the FORWARD rule Create added. With br_netfilter loaded, frames bridged between the bridge's
// ports pass the host's FORWARD chain, which a Docker host drops by default: Create accepts the
// bridge's own traffic there.
func Create(bridge, addr string) (remove func(), err error) {
	var fwd []string
	remove = func() {
		_ = run("ip", "link", "delete", bridge)
		if fwd != nil {
			_ = run("iptables", append([]string{"-D"}, fwd...)...)
		}
	}
	for _, args := range [][]string{
		{"link", "add", bridge, "type", "bridge"},
		{"addr", "add", addr, "dev", bridge},
		{"link", "set", bridge, "up"},
	} {
		if err := run("ip", args...); err != nil {
			remove()
			return nil, err
		}
	}
	if b, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables"); err == nil && strings.TrimSpace(string(b)) == "1" {
		rule := []string{"FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"}
		if err := run("iptables", append([]string{"-I"}, rule...)...); err != nil {
			remove()
			return nil, err
		}
		fwd = rule
	}
	return remove, nil
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
