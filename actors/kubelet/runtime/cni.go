package runtime

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"

	gocni "github.com/containerd/go-cni"
)

// CNIPlugins are the plugin binaries the generated network calls, all in CNIBinDir.
var CNIPlugins = []string{"bridge", "host-local", "loopback", "portmap", "firewall"}

// conflist is the network Skiff generates when the operator gives none: a
// node bridge with host-local IPAM over the pod CIDR (the bridge is the
// pods' gateway and masquerades their egress), portmap for a sandbox given port mappings (the
// kubelet gives none: the node proxy serves hostPorts in eBPF), and firewall, which
// accepts the pods' forwarded traffic on hosts whose FORWARD policy drops it (Docker sets
// DROP, and with br_netfilter even bridged pod-to-pod packets pass that chain).
func conflist(o Options) ([]byte, error) {
	if _, _, err := net.ParseCIDR(o.PodCIDR); err != nil {
		return nil, fmt.Errorf("pod CIDR: %w", err)
	}
	type obj = map[string]any
	return json.MarshalIndent(obj{
		"cniVersion": "1.0.0",
		"name":       "skiff",
		"plugins": []obj{
			{
				"type":        "bridge",
				"bridge":      o.Bridge,
				"isGateway":   true,
				"ipMasq":      true,
				"hairpinMode": true,
				"ipam": obj{
					"type":    "host-local",
					"ranges":  [][]obj{{{"subnet": o.PodCIDR}}},
					"routes":  []obj{{"dst": "0.0.0.0/0"}},
					"dataDir": filepath.Join(o.Root, "cni", "ipam"),
				},
			},
			{"type": "portmap", "capabilities": obj{"portMappings": true}},
			{"type": "firewall", "backend": "iptables"},
		},
	}, "", "  ")
}

func newCNI(o Options) (gocni.CNI, error) {
	opts := []gocni.Opt{gocni.WithPluginDir([]string{o.CNIBinDir}), gocni.WithInterfacePrefix("eth")}
	if o.CNIConfDir != "" {
		opts = append(opts, gocni.WithPluginConfDir(o.CNIConfDir), gocni.WithLoNetwork, gocni.WithDefaultConf)
	} else {
		b, err := conflist(o)
		if err != nil {
			return nil, err
		}
		// Written out so an operator can see (and CNI tools reuse) what runs.
		dir := filepath.Join(o.Root, "cni", "net.d")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "10-skiff.conflist"), b, 0o644); err != nil {
			return nil, err
		}
		// The pod network goes first: go-cni names it eth<index>.
		opts = append(opts, gocni.WithConfListBytes(b), gocni.WithLoNetwork)
	}
	c, err := gocni.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("cni: %w", err)
	}
	return c, nil
}

// podIP picks the sandbox's IPv4 address (eth0) from a CNI result.
func podIP(res *gocni.Result) (string, error) {
	if cfg, ok := res.Interfaces["eth0"]; ok {
		for _, ipc := range cfg.IPConfigs {
			if ipc.IP.To4() != nil {
				return ipc.IP.String(), nil
			}
		}
	}
	for _, cfg := range res.Interfaces {
		if cfg.Sandbox == "" {
			continue
		}
		for _, ipc := range cfg.IPConfigs {
			if !ipc.IP.IsLoopback() {
				return ipc.IP.String(), nil
			}
		}
	}
	return "", fmt.Errorf("cni result has no pod address: %+v", res.Interfaces)
}
