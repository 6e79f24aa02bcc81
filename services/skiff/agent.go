package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/agent"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/internal/tracing"
)

// nodeFlags are the node agent's flags, shared by `skiff up` and `skiff agent`.
type nodeFlags struct {
	enabled      bool
	required     bool // asked for explicitly: failing to start it is an error
	otlpEndpoint string
	name         string
	containerd   string
	podCIDR      string
	images       string
	cgroup       string
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
	f.StringVar(&n.cgroup, "cgroup-root", "", "cgroup2 directory whose processes reach Services (default: a cgroup2 mount under the data dir)")
}

func (n *nodeFlags) start(ctx context.Context, log *statelog.Log, nc *nats.Conn, actors *actorkit.System, dataDir string, logger *slog.Logger) (*agent.Agent, error) {
	if why := agent.Supported(); why != "" {
		fmt.Fprintf(os.Stderr, "skiff: no node agent here: %s\n", why)
		return nil, nil
	}
	images := n.images
	if images == "" {
		images = filepath.Join(dataDir, "images")
	}
	return agent.Start(ctx, agent.Config{Log: log, Client: &apiclient.Client{T: apiclient.NATS{Conn: nc}}, NATS: nc, Actors: actors, NodeName: n.name, DataDir: dataDir,
		ContainerdSocket: n.containerd, PodCIDR: n.podCIDR, ImagesDir: images, CgroupRoot: n.cgroup, Logger: logger})
}

func newAgent() *cobra.Command {
	node := &nodeFlags{}
	var natsURL, dataDir string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a node agent (kubelet + proxy) that joins a Skiff control plane through NATS",
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := join(cmd.Context(), natsURL, "skiff-agent-"+node.name)
			if err != nil {
				return err
			}
			defer m.close()
			shutdown, err := tracing.Setup(m.ctx, "skiff-agent", node.otlpEndpoint)
			if err != nil {
				return err
			}
			defer flushTraces(shutdown)
			logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
			a, err := node.start(m.ctx, m.log, m.nc, m.actors, dataDir, logger)
			if err != nil {
				return err
			}
			if a == nil {
				return fmt.Errorf("this machine cannot run a node agent")
			}
			defer a.Stop()
			fmt.Fprintf(os.Stderr, "skiff agent %s is up\n", node.name)
			<-m.ctx.Done()
			return nil
		},
	}
	node.register(cmd, false)
	cmd.Flags().StringVar(&node.otlpEndpoint, "otlp-endpoint", "", "export traces over OTLP/HTTP here (standard OTEL_* variables are honoured too)")
	cmd.Flags().StringVar(&natsURL, "nats-url", "nats://127.0.0.1:4222", "the control plane's NATS")
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir()+"-agent", "where containerd and pod data live")
	return cmd
}
