// Package agent assembles a Skiff node: the container runtime (containerd, started here when no
// socket is given), the cluster DNS, kubelet and proxy actors, all reading the state log and
// writing through the apiserver.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/clusterdns"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/actors/kubelet"
	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/actors/kubelet/stats"
	"github.com/skiff-sh/skiff/actors/netpol"
	"github.com/skiff-sh/skiff/actors/proxy"
	"github.com/skiff-sh/skiff/actors/routes"
	"github.com/skiff-sh/skiff/bus/statelog"
)

// Config describes one node.
type Config struct {
	Log    *statelog.Log
	Client *apiclient.Client
	// Informers is the process's shared informer factory (skiff up shares the control plane's);
	// nil = the agent makes one and spawns its actor.
	Informers        *informer.Factory
	NATS             *nats.Conn // the node API (logs, exec) is served here
	Actors           *actorkit.System
	NodeName         string
	DataDir          string        // containerd root, pod dirs, logs
	ContainerdSocket string        // "" starts a containerd under DataDir
	CNIBinDir        string        // the CNI plugins; default /opt/cni/bin (skiff's own are in its data dir's bin)
	PodCIDR          string        // default 10.88.0.0/16
	Bridge           string        // node bridge for pod veths; default skiff0
	ImagesDir        string        // every *.tar here is imported at start (airgap images, as k3s does)
	RegistryConfig   string        // registry hosts directory in containerd's layout (mirrors); "" = none
	CgroupRoot       string        // cgroup2 mount whose processes reach Services; "" mounts one under DataDir
	NodeIP           string        // InternalIP; "" = the first non-loopback IPv4
	Namespace        string        // containerd namespace the node's pods live in (and their cgroup parent); default "skiff"
	RenewInterval    time.Duration // node lease renewal; 0 = the kubelet's default (10 s)
	StatsInterval    time.Duration // cgroup sampling for the metrics API; 0 = 10 s
	// RoutePodCIDRs programs a route to every other Ready node's pod CIDR via its InternalIP
	// (nodes on one L2 segment; see actors/routes).
	RoutePodCIDRs bool
	// PodsViaAPI: the kubelet caches only this node's pods, watched through the apiserver
	// (kubelet.Config.PodsViaAPI); for an agent in its own process.
	PodsViaAPI bool
	// Cluster DNS (actors/clusterdns): served on DNSListen (default: the pod bridge's address,
	// the pod CIDR's first, port 53), which the proxy routes the kube-dns Service to; pods'
	// resolv.conf names ClusterDNS (default 10.96.0.10, kube-dns) and searches ClusterDomain
	// (default cluster.local). DNSUpstreams are the resolvers (ip or ip:port) the DNS server
	// forwards other names to; nil = the node's resolv.conf.
	DNSListen     string
	ClusterDNS    string
	ClusterDomain string
	DNSUpstreams  []string
	Logger        *slog.Logger
}

// DefaultClusterDNS is the kube-dns Service's address (actors/controlplane keeps it).
const DefaultClusterDNS = "10.96.0.10"

// Agent is a running node.
type Agent struct {
	Runtime *kruntime.Runtime
	Proxy   *proxy.Proxy
	Policy  *netpol.Enforcer
	DNS     *clusterdns.Server
	Stats   *stats.Sampler // the node's resource usage, served to the metrics API
	pids    []*actorkit.PID
	actors  *actorkit.System
	subs    []*nats.Subscription
	node    string
}

// Supported reports why this machine cannot run a node agent ("" when it can).
func Supported() string {
	if os.Geteuid() != 0 {
		return "the node agent needs root (containers, network namespaces, eBPF)"
	}
	return ""
}

// Start brings the node up.
func Start(ctx context.Context, cfg Config) (*Agent, error) {
	if why := Supported(); why != "" {
		return nil, errors.New(why)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.NodeName == "" {
		h, _ := os.Hostname()
		cfg.NodeName = h
	}
	if cfg.PodCIDR == "" {
		cfg.PodCIDR = "10.88.0.0/16"
	}
	if cfg.NodeIP == "" {
		cfg.NodeIP = kubelet.FirstIPv4()
	}
	if cfg.ClusterDNS == "" {
		cfg.ClusterDNS = DefaultClusterDNS
	}
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = clusterdns.DefaultDomain
	}
	// Set before the kubelet starts, the only caller of the runtime's NetworkReady.
	var policyEnforcer *netpol.Enforcer
	rt, err := kruntime.New(ctx, kruntime.Options{Socket: cfg.ContainerdSocket, CNIBinDir: cfg.CNIBinDir, Root: filepath.Join(cfg.DataDir, "node"), PodCIDR: cfg.PodCIDR, Bridge: cfg.Bridge, Namespace: cfg.Namespace,
		RegistryConfigDir: cfg.RegistryConfig, NetworkReady: func(ctx context.Context, netnsPath string) error {
			return policyEnforcer.Protect(ctx, netnsPath)
		}})
	if err != nil {
		return nil, fmt.Errorf("container runtime: %w", err)
	}
	a := &Agent{Runtime: rt, actors: cfg.Actors, node: cfg.NodeName}
	if cfg.Informers == nil {
		cfg.Informers = informer.NewFactory(cfg.Log)
		pid, err := cfg.Actors.Spawn("informers", cfg.Informers.Actor())
		if err != nil {
			a.Stop()
			return nil, err
		}
		a.pids = append(a.pids, pid)
	}
	if cfg.ImagesDir != "" {
		if err := rt.ImportDir(ctx, cfg.ImagesDir); err != nil {
			cfg.Logger.Warn("importing images", "dir", cfg.ImagesDir, "err", err)
		}
	}
	cgroup := cfg.CgroupRoot
	if cgroup == "" {
		if cgroup, err = cgroup2Root(filepath.Join(cfg.DataDir, "cgroup2")); err != nil {
			a.Stop()
			return nil, err
		}
	}
	dnsAddr, err := dnsListen(cfg)
	if err != nil {
		a.Stop()
		return nil, err
	}
	a.DNS = clusterdns.New(clusterdns.Config{Informers: cfg.Informers, NodeName: cfg.NodeName, Domain: cfg.ClusterDomain, Listen: dnsAddr.String(),
		Upstreams: cfg.DNSUpstreams, Logger: cfg.Logger})
	pid, err := cfg.Actors.Spawn("clusterdns", a.DNS.Producer())
	if err != nil {
		a.Stop()
		return nil, err
	}
	a.pids = append(a.pids, pid)
	dns := kubelet.DNSConfig{ClusterDNS: []string{cfg.ClusterDNS}, ClusterDomain: cfg.ClusterDomain}
	kcfg := kubelet.Config{Log: cfg.Log, Informers: cfg.Informers, Client: cfg.Client, NodeName: cfg.NodeName, Runtime: rt, PodCIDR: cfg.PodCIDR,
		NodeIP: cfg.NodeIP, RenewInterval: cfg.RenewInterval, PodsViaAPI: cfg.PodsViaAPI, DNS: dns, Logger: cfg.Logger}
	kcfg.Pods = kubelet.PodInformer(kcfg) // shared with the proxy, which serves hostPorts
	a.Policy = netpol.New(netpol.Config{Informers: cfg.Informers, NodeName: cfg.NodeName, Bridge: cfg.Bridge,
		HostAddrs: hostAddrs(cfg), Logger: cfg.Logger})
	policyEnforcer = a.Policy
	if pid, err = cfg.Actors.Spawn("kubelet", kubelet.New(kcfg)); err != nil {
		a.Stop()
		return nil, err
	}
	a.pids = append(a.pids, pid)
	if cfg.RoutePodCIDRs {
		// isGateway in the CNI bridge turns forwarding on when the first pod starts; a node
		// that only forwards for others needs it too.
		if err := enableForwarding(); err != nil {
			a.Stop()
			return nil, fmt.Errorf("enable ip_forward: %w", err)
		}
		producer, err := routes.New(cfg.Informers, cfg.NodeName, cfg.PodCIDR, routes.Env{}, cfg.Logger)
		if err == nil {
			pid, err = cfg.Actors.Spawn("routes", producer)
		}
		if err != nil {
			a.Stop()
			return nil, err
		}
		a.pids = append(a.pids, pid)
	}
	nodeIP, err := netip.ParseAddr(cfg.NodeIP)
	if err != nil {
		a.Stop()
		return nil, fmt.Errorf("node IP %q: %w", cfg.NodeIP, err)
	}
	a.Proxy = proxy.New(proxy.Config{Log: cfg.Log, Informers: cfg.Informers, NodeName: cfg.NodeName, Cgroups: []string{cgroup}, LocalDNS: dnsAddr,
		NodeIPs: []netip.Addr{nodeIP.Unmap()}, Pods: kcfg.Pods, Logger: cfg.Logger})
	if pid, err = cfg.Actors.Spawn("proxy", a.Proxy.Producer()); err != nil {
		a.Stop()
		return nil, err
	}
	a.pids = append(a.pids, pid)
	if pid, err = cfg.Actors.Spawn("netpol", a.Policy.Producer()); err != nil {
		a.Stop()
		return nil, err
	}
	a.pids = append(a.pids, pid)
	a.Stats = stats.New(stats.Config{Cgroups: stats.Cgroups{Root: "/sys/fs/cgroup", V2: rt.CgroupV2(), Meminfo: "/proc/meminfo"},
		Containers: rt.Running, Interval: cfg.StatsInterval, Logger: cfg.Logger})
	if pid, err = cfg.Actors.Spawn("stats", a.Stats.Producer()); err != nil {
		a.Stop()
		return nil, err
	}
	a.pids = append(a.pids, pid)
	if cfg.NATS != nil {
		if a.subs, err = serveNodeAPI(cfg.NATS, cfg.NodeName, rt, a.Stats); err != nil {
			a.Stop()
			return nil, err
		}
	}
	return a, nil
}

// dnsListen is where the node's DNS server listens: DNSListen, or port 53 on the pod bridge's
// address (the pod CIDR's first, the CNI bridge's gateway), which every pod reaches.
func dnsListen(cfg Config) (netip.AddrPort, error) {
	if cfg.DNSListen != "" {
		ap, err := netip.ParseAddrPort(cfg.DNSListen)
		if err != nil {
			return ap, fmt.Errorf("DNS listen address %q: want ip:port", cfg.DNSListen)
		}
		return ap, nil
	}
	p, err := netip.ParsePrefix(cfg.PodCIDR)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("pod CIDR %q: %w", cfg.PodCIDR, err)
	}
	return netip.AddrPortFrom(p.Masked().Addr().Next(), 53), nil
}

// hostAddrs are the node's own addresses a pod's policies always admit: the bridge's (the pod
// CIDR's first, the CNI gateway, where probes come from) and the node IP.
func hostAddrs(cfg Config) []netip.Addr {
	var out []netip.Addr
	if p, err := netip.ParsePrefix(cfg.PodCIDR); err == nil {
		out = append(out, p.Masked().Addr().Next())
	}
	if a, err := netip.ParseAddr(cfg.NodeIP); err == nil {
		out = append(out, a)
	}
	return out
}

// cgroup2Root finds the host's cgroup2 mount (the unified hierarchy of a hybrid or pure v2
// system), or mounts one at dir. There is one cgroup2 hierarchy per host and every process
// starts in its root, so hooks attached there see the host's and the pods' connects alike.
func cgroup2Root(dir string) (string, error) {
	if mounts, err := os.ReadFile("/proc/self/mounts"); err == nil {
		for _, line := range strings.Split(string(mounts), "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && f[2] == "cgroup2" {
				return f[1], nil
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := unix.Mount("none", dir, "cgroup2", 0, ""); err != nil {
		return "", fmt.Errorf("mount cgroup2 at %s: %w", dir, err)
	}
	return dir, nil
}

// Stop stops the node's actors and closes the runtime; containers keep running and are adopted
// by the next agent, as with a kubelet restart.
func (a *Agent) Stop() {
	a.stopActors()
	if a.Runtime != nil {
		_ = a.Runtime.Close()
	}
}

// Teardown stops the node for good: actors first (so no kubelet recreates what is removed),
// then the pinned Service hooks and maps, every pod sandbox with its containers, and the runtime.
func (a *Agent) Teardown(ctx context.Context) {
	a.stopActors()
	// Unlinking the pinned links detaches the hooks; the maps go with their last reference.
	_ = os.RemoveAll(proxy.DefaultPinDir(a.node))
	_ = os.RemoveAll(netpol.DefaultPinDir(a.node))
	if a.Runtime != nil {
		if pods, err := a.Runtime.List(ctx); err == nil {
			for _, p := range pods {
				_ = a.Runtime.StopSandbox(ctx, p.PodUID)
			}
		}
	}
	a.Stop()
}

func (a *Agent) stopActors() {
	for _, s := range a.subs {
		_ = s.Drain()
	}
	a.subs = nil
	for i := len(a.pids) - 1; i >= 0; i-- {
		a.actors.Stop(a.pids[i])
	}
	a.pids = nil
}

// enableForwarding turns IPv4 forwarding on unless it already is: a container's /proc/sys can be
// read-only with forwarding set up front (Docker's sysctls), as in deploy/compose.yaml.
func enableForwarding() error {
	const f = "/proc/sys/net/ipv4/ip_forward"
	if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) == "1" {
		return nil
	}
	return os.WriteFile(f, []byte("1"), 0o644)
}
