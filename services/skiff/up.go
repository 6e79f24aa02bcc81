package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/tracestream"
	"github.com/skiff-sh/skiff/internal/metrics"
	"github.com/skiff-sh/skiff/internal/spanstore"
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
	natsAuth := true
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run all of Skiff in this process, with an embedded NATS JetStream server",
		RunE: func(cmd *cobra.Command, _ []string) error {
			node.required = cmd.Flags().Changed("agent")
			if err := automountFlag(cmd.Flags(), &cfg); err != nil {
				return err
			}
			secureEmbeddedNATS(&cfg, natsAuth)
			return runControlPlane(cmd.Context(), cfg, &node)
		},
	}
	f := cmd.Flags()
	node.register(cmd, true)
	f.BoolVar(&natsAuth, "nats-auth", true, "require per-component credentials on the embedded NATS port (agents: skiff nats-creds)")
	controlPlaneFlags(f, &cfg, &node, "127.0.0.1:6443")
	// A laptop cluster is secured by default: HTTPS, authentication, RBAC.
	cfg.APIAuth.Enabled = true
	f.Lookup("api-auth").DefValue = "true"
	return cmd
}

func runControlPlane(ctx context.Context, cfg controlplane.Config, node *nodeFlags) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	// Recent spans stay in memory for `skiff trace`, beside any OTLP export.
	spans := spanstore.New(spanstore.Options{})
	if node != nil {
		shutdown, err := tracing.Setup(ctx, "skiff", node.otlpEndpoint, tracing.WithProcessor(spans))
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
	if cp.API != nil { // a `skiff server` replica may run no apiserver
		// Traces live in a JetStream stream every apiserver replica reads, kept across restarts.
		if _, err := cp.Actors.Spawn("tracestream", tracestream.NewActor(tracestream.Config{Conn: cp.Conn, Store: spans, Logger: cfg.Logger})); err != nil {
			return err
		}
		cp.API.Handle(spanstore.TracePath, spans.Handler())
		cp.API.Handle(spanstore.OTLPPath, spans.OTLPHandler())
		serveProfiling(cp.API)
	} else if node != nil {
		if _, err := metrics.Serve(ctx, node.metricsListen, cfg.Logger); err != nil {
			return fmt.Errorf("--metrics-listen: %w", err)
		}
	}
	if node != nil && node.enabled {
		nc, err := nodeConn(cp, node.name)
		if err != nil {
			return err
		}
		if nc != cp.Conn {
			defer nc.Close()
		}
		a, err := node.start(ctx, cp.Log, cp.Informers, nc, cp.Actors, cfg.DataDir, cfg.Logger)
		if err != nil && node.required {
			return err
		}
		if err != nil {
			// The agent was only on by default (running as root): the control plane still serves.
			fmt.Fprintf(os.Stderr, "skiff: running without a node agent: %v\n", err)
		}
		if a != nil {
			defer a.Stop()
		}
	}
	kubeconfig := ""
	if cfg.DataDir != "" && cp.URL() != "" {
		var err error
		if kubeconfig, err = writeKubeconfig(cfg.DataDir, cp.URL(), cp.PKI()); err != nil {
			return err
		}
	}
	if cfg.DataDir != "" && cp.NATS != nil {
		if err := writeNATSURL(cfg.DataDir, cp.NATS.ClientURL()); err != nil {
			return err
		}
	}
	if cp.URL() == "" {
		// A scheduler or controller-manager alone: nothing here for a user to call.
		fmt.Fprintf(os.Stderr, "skiff is up in %v: %s, state revision %d\n", time.Since(start).Round(time.Millisecond), strings.Join(cfg.Components, ", "), cp.Log.Rev())
	} else {
		fmt.Fprintf(os.Stderr, "skiff is up in %v: API %s, state revision %d\n", time.Since(start).Round(time.Millisecond), cp.URL(), cp.Log.Rev())
		if kubeconfig != "" {
			fmt.Fprintf(os.Stderr, "kubectl: export KUBECONFIG=%s\n", kubeconfig)
		}
		printNextCommands(os.Stderr)
	}
	if cp.Secured() {
		fmt.Fprintf(os.Stderr, "NATS %s needs credentials: skiff agent --nats-creds FILE, FILE from `skiff nats-creds --data-dir %s --node NAME`\n", cp.NATS.ClientURL(), cfg.DataDir)
	}
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "skiff: shutting down")
	return nil
}

// printNextCommands shows a new user the three steps after start, spelled as they started
// skiff: `go run ./services/skiff` from the Go build cache (not on PATH), the binary's path
// under the working directory (bin/skiff from `go tool task up`), else `skiff`.
func printNextCommands(w io.Writer) {
	fmt.Fprintf(w, "next:\n  %[1]s apply -f deploy/examples/web.yaml\n  %[1]s get pods\n  %[1]s trace deploy/web\n", selfCommand())
}

func selfCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return "skiff"
	}
	if cache := os.Getenv("GOCACHE"); strings.Contains(exe, "go-build") || (cache != "" && strings.HasPrefix(exe, cache)) {
		return "go run ./services/skiff"
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, exe); err == nil && !strings.HasPrefix(rel, "..") {
			if !strings.Contains(rel, "/") {
				rel = "./" + rel // a name alone would be looked up on PATH
			}
			return rel
		}
	}
	return "skiff"
}

// flushTraces gives the exporter a few seconds to send what is buffered.
func flushTraces(shutdown func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = shutdown(ctx)
}
