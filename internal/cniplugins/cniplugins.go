// Package cniplugins is the CNI plugins the node's generated network calls (bridge,
// host-local, loopback, portmap, firewall), written for the skiff binary to carry as
// multi-call entries (internal/nodebin): the upstream plugins' main packages cannot be
// imported, so each entry here is a thin CNI command over their importable packages
// (pkg/ip, pkg/ipam, pkg/ns, pkg/utils, host-local's allocator and disk store). Each does
// what runtime's conflist asks of it and refuses settings it does not implement.
package cniplugins

import (
	"encoding/json"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/utils"
)

// Entries are the plugins by the name a network configuration's "type" gives.
var Entries = map[string]func() int{
	"bridge":     plugin(bridgeFuncs, "skiff bridge"),
	"host-local": plugin(hostLocalFuncs, "skiff host-local IPAM"),
	"loopback":   plugin(loopbackFuncs, "skiff loopback"),
	"portmap":    plugin(portmapFuncs, "skiff portmap"),
	"firewall":   plugin(firewallFuncs, "skiff firewall"),
}

// plugin runs funcs as a CNI plugin reading its command from the environment and stdin.
func plugin(funcs skel.CNIFuncs, about string) func() int {
	return func() int {
		skel.PluginMainFuncs(funcs, version.All, about) // exits 1 on error, having printed it
		return 0
	}
}

// parse decodes a plugin's configuration into conf, refusing fields it does not know, and
// its previous result (chained plugins) when it has one.
func parse(stdin []byte, conf any, known ...string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(stdin, &fields); err != nil {
		return fmt.Errorf("network configuration: %w", err)
	}
	allowed := map[string]bool{"cniVersion": true, "name": true, "type": true, "prevResult": true,
		"runtimeConfig": true, "capabilities": true, "args": true, "ipam": true, "dns": true}
	for _, k := range known {
		allowed[k] = true
	}
	for k := range fields {
		if !allowed[k] {
			return fmt.Errorf("network configuration: field %q is not supported by skiff's built-in plugins", k)
		}
	}
	return json.Unmarshal(stdin, conf)
}

// prevResult is a chained plugin's input result in the current spec version.
func prevResult(pc *types.PluginConf) (*current.Result, error) {
	if err := version.ParsePrevResult(pc); err != nil {
		return nil, err
	}
	if pc.PrevResult == nil {
		return nil, fmt.Errorf("%s: needs a previous plugin's result (use it in a conflist after bridge)", pc.Type)
	}
	return current.NewResultFromResult(pc.PrevResult)
}

// podIPv4 is the container-side IPv4 of a result.
func podIPv4(res *current.Result) net.IP {
	for _, ipc := range res.IPs {
		if ipc.Address.IP.To4() != nil {
			return ipc.Address.IP.To4()
		}
	}
	return nil
}

// comment tags a container's iptables rules so DEL finds them.
func comment(network, containerID string) string {
	return utils.FormatComment(network, containerID)
}
