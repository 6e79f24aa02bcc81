package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/agent"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/clusterdns"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/deploy/images/demo"
	"github.com/skiff-sh/skiff/internal/tracing"
)

// nodeFlags are the node agent's flags, shared by `skiff up` and `skiff agent`.
type nodeFlags struct {
	enabled      bool
	required     bool // asked for explicitly: failing to start it is an error
	otlpEndpoint string
	name         string
	podsViaAPI   bool // the kubelet watches its pods through the API (skiff agent), not the shared cache
	containerd   string
	podCIDR      string
	images       string
	registries   string
	cgroup       string
	nodeIP       string
	namespace    string
	leaseRenew   time.Duration
	routes       bool
	dnsListen    string
	clusterDNS   string
	domain       string

	// metricsListen serves /metrics for a process without an apiserver (which serves its own).
	metricsListen string
}

func (n *nodeFlags) register(cmd *cobra.Command, optional bool) {
	f := cmd.Flags()
	if optional {
		f.BoolVar(&n.enabled, "agent", agent.Supported() == "", "also run a node agent here (needs root)")
	} else {
		n.enabled = true
	}
	host, _ := os.Hostname()
	f.StringVar(&n.name, "node-name", host, "this node's name")
	f.StringVar(&n.containerd, "containerd-socket", "", "containerd to use; empty starts one under the data dir")
	f.StringVar(&n.podCIDR, "pod-cidr", "10.88.0.0/16", "this node's pod IP range")
	f.StringVar(&n.images, "images-dir", "", "import every image tarball in this directory at start (default DATA_DIR/images)")
	f.StringVar(&n.registries, "registry-config-dir", "", "registry hosts directory in containerd's layout (DIR/<registry>/hosts.toml: mirrors, plain HTTP, CAs) for image pulls")
	f.StringVar(&n.cgroup, "cgroup-root", "", "cgroup2 directory whose processes reach Services (default: a cgroup2 mount under the data dir)")
	f.StringVar(&n.nodeIP, "node-ip", "", "this node's InternalIP (default: the first non-loopback IPv4)")
	f.StringVar(&n.namespace, "containerd-namespace", "skiff", "containerd namespace (and cgroup parent) of this node's pods")
	f.DurationVar(&n.leaseRenew, "node-lease-renew-interval", 10*time.Second, "how often the node renews its lease (keep it well under the control plane's node grace period)")
	// A lone `skiff up` node has no peers to route to; joined agents do.
	f.BoolVar(&n.routes, "route-pod-cidrs", !optional, "route other Ready nodes' pod CIDRs via their InternalIP (nodes on one L2 network)")
	f.StringVar(&n.dnsListen, "dns-listen", "", "ip:port of this node's cluster DNS server (default: port 53 on the pod CIDR's first address, the pod bridge's)")
	f.StringVar(&n.clusterDNS, "cluster-dns", agent.DefaultClusterDNS, "the nameserver pods with dnsPolicy ClusterFirst get (the kube-dns Service's ClusterIP)")
	f.StringVar(&n.domain, "cluster-domain", clusterdns.DefaultDomain, "the cluster's DNS domain")
}

// start runs the node agent; informers is the process's shared factory (nil: the agent makes its own).
func (n *nodeFlags) start(ctx context.Context, log *statelog.Log, informers *informer.Factory, nc *nats.Conn, actors *actorkit.System, dataDir string, logger *slog.Logger) (*agent.Agent, error) {
	if why := agent.Supported(); why != "" {
		fmt.Fprintf(os.Stderr, "skiff: no node agent here: %s\n", why)
		return nil, nil
	}
	bin, err := carryNodeBinaries(dataDir)
	if err != nil {
		return nil, err
	}
	images := n.images
	if images == "" {
		// The default images directory always holds the demo's image, carried in this binary.
		images = filepath.Join(dataDir, "images")
		if err := demo.Write(images); err != nil {
			return nil, fmt.Errorf("demo image: %w", err)
		}
	}
	// The agent calls the API as its node (system:node:<name>); on secured NATS only it can.
	client := &apiclient.Client{T: apiclient.NATS{Conn: nc, Subject: identity.NodeID(n.name).APISubject()}}
	return agent.Start(ctx, agent.Config{Log: log, Informers: informers, Client: client, NATS: nc, Actors: actors, NodeName: n.name, DataDir: dataDir,
		ContainerdSocket: n.containerd, CNIBinDir: bin, PodCIDR: n.podCIDR, ImagesDir: images, RegistryConfig: n.registries, CgroupRoot: n.cgroup, Logger: logger,
		NodeIP: n.nodeIP, Namespace: n.namespace, RenewInterval: n.leaseRenew, RoutePodCIDRs: n.routes, PodsViaAPI: n.podsViaAPI,
		DNSListen: n.dnsListen, ClusterDNS: n.clusterDNS, ClusterDomain: n.domain})
}

func newAgent() *cobra.Command {
	node := &nodeFlags{}
	var natsURL, natsCreds, dataDir string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a node agent (kubelet, proxy, cluster DNS) that joins a Skiff control plane through NATS",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			m, err := controlplane.Join(ctx, natsURL, "skiff-agent-"+node.name, controlplane.NATSAuth{Creds: natsCreds, ID: identity.NodeID(node.name)})
			if err != nil {
				return err
			}
			defer m.Close()
			logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
			// Spans go to the control plane's store over this node's API subject, and to OTLP if asked.
			toStore, err := apiServerSpans(ctx, apiclient.NATS{Conn: m.Conn, Subject: identity.NodeID(node.name).APISubject()}, logger)
			if err != nil {
				return err
			}
			shutdown, err := tracing.Setup(ctx, "skiff-agent", node.otlpEndpoint, tracing.WithProcessor(toStore))
			if err != nil {
				return err
			}
			defer flushTraces(shutdown)
			if err := node.serveMetrics(ctx, cmd, logger); err != nil {
				return err
			}
			node.podsViaAPI = true // a joined node caches only its own pods, through the API
			a, err := node.start(ctx, m.Log, m.Informers, m.Conn, m.Actors, dataDir, logger)
			if err != nil {
				return err
			}
			if a == nil {
				return fmt.Errorf("this machine cannot run a node agent")
			}
			defer a.Stop()
			fmt.Fprintf(os.Stderr, "skiff agent %s is up\n", node.name)
			<-ctx.Done()
			return nil
		},
	}
	node.register(cmd, false)
	cmd.Flags().StringVar(&node.otlpEndpoint, "otlp-endpoint", "", "export traces over OTLP/HTTP here (standard OTEL_* variables are honoured too)")
	node.metricsFlag(cmd.Flags())
	cmd.Flags().StringVar(&natsURL, "nats-url", defaultNATSURL, "the control plane's NATS")
	cmd.Flags().StringVar(&natsCreds, "nats-creds", "", "this node's NATS credentials `FILE` (from \"skiff nats-creds --node NAME\" on the control plane); needed when its NATS is secured")
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir()+"-agent", "where containerd and pod data live")
	return cmd
}
