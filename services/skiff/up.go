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

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/internal/tracing"
)

func defaultDataDir() string {
	if d := os.Getenv("SKIFF_DATA_DIR"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".skiff"
	}
	return filepath.Join(home, ".skiff")
}

func newUp() *cobra.Command {
	cfg := controlplane.Config{}
	node := nodeFlags{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run all of Skiff in this process, with an embedded NATS JetStream server",
		RunE: func(cmd *cobra.Command, _ []string) error {
			node.required = cmd.Flags().Changed("agent")
			return runControlPlane(cmd.Context(), cfg, &node)
		},
	}
	f := cmd.Flags()
	node.register(cmd, true)
	f.StringVar(&node.otlpEndpoint, "otlp-endpoint", "", "export traces over OTLP/HTTP here (standard OTEL_* variables are honoured too)")
	f.StringVar(&cfg.DataDir, "data-dir", defaultDataDir(), "where the state log (JetStream store) and the kubeconfig live")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:6443", "apiserver address")
	f.StringVar(&cfg.NATSURL, "nats-url", "", "use this NATS (JetStream) cluster instead of the embedded server")
	f.IntVar(&cfg.NATSPort, "nats-port", 4222, "embedded NATS client port (0 = in-process only)")
	f.IntVar(&cfg.Replicas, "replicas", 1, "replicas of the state stream (3 on a NATS cluster)")
	f.StringVar(&cfg.ServiceCIDR, "service-cidr", "10.96.0.0/16", "ClusterIP range")
	f.DurationVar(&cfg.CompactEvery, "compact-every", 5*time.Minute, "how often old history is compacted")
	f.DurationVar(&cfg.CompactKeep, "compact-keep", 5*time.Minute, "how much history watches can resume from")
	return cmd
}

func runControlPlane(ctx context.Context, cfg controlplane.Config, node *nodeFlags) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	if node != nil {
		shutdown, err := tracing.Setup(ctx, "skiff", node.otlpEndpoint)
		if err != nil {
			return err
		}
		defer flushTraces(shutdown)
	}
	start := time.Now()
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer cp.Stop()
	if node != nil && node.enabled {
		a, err := node.start(ctx, cp.Log, cp.Conn, cp.Actors, cfg.DataDir, cfg.Logger)
		if err != nil && node.required {
			return err
		}
		if err != nil {
			// The agent was only on by default (running as root): the control plane still serves.
			fmt.Fprintf(os.Stderr, "skiff: running without a node agent: %v (install containerd, runc and the CNI plugins: .ci/deps/node.sh)\n", err)
		}
		if a != nil {
			defer a.Stop()
		}
	}
	kubeconfig := ""
	if cfg.DataDir != "" && cp.URL() != "" {
		kubeconfig = filepath.Join(cfg.DataDir, "kubeconfig")
		if err := os.WriteFile(kubeconfig, []byte(kubeconfigFor(cp.URL(), "")), 0o600); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "skiff is up in %v: API %s, state revision %d\n", time.Since(start).Round(time.Millisecond), cp.URL(), cp.Log.Rev())
	if kubeconfig != "" {
		fmt.Fprintf(os.Stderr, "kubectl: export KUBECONFIG=%s\n", kubeconfig)
	}
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "skiff: shutting down")
	return nil
}

// flushTraces gives the exporter a few seconds to send what is buffered.
func flushTraces(shutdown func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = shutdown(ctx)
}
