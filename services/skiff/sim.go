package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/simnode"
	"github.com/skiff-sh/skiff/internal/tracing"
)

// simGCPercent is `skiff sim nodes`'s GOGC unless the environment sets one. Its live heap is
// the pod and node caches, and its garbage the objects it decodes, a few per pod: the GC's
// work is the bytes allocated over GOGC, a quarter of the process's CPU at Go's default (100)
// in the system benchmark. A scale-test tool spends memory, which the runtime gives back
// between runs, rather than the cores the control plane under test needs.
const simGCPercent = 300

// newSim is the scale-test mode (like kwok): simulated nodes that register, renew leases and
// report bound pods Running without containers. It is never how real pods run.
func newSim(g *globals) *cobra.Command {
	sim := &cobra.Command{Use: "sim", Short: "Scale-test mode: simulated nodes without containers (like kwok)"}
	var count int
	var renew time.Duration
	var prefix, natsURL, natsCreds, dataDir, pprofListen string
	nodes := &cobra.Command{
		Use:   "nodes",
		Short: "Register simulated nodes and keep them alive until interrupted",
		RunE: func(cmd *cobra.Command, _ []string) error {
			dataDir = instanceDataDir(dataDir, cmd.Flags().Changed("data-dir"), g.kubeconfig)
			natsURL = instanceNATSURL(natsURL, cmd.Flags().Changed("nats-url"), dataDir)
			// Simulated nodes write as many nodes: the admin identity, not a node's.
			auth, err := localAdmin(natsCreds, dataDir)
			if err != nil {
				return err
			}
			defaultGCPercent(simGCPercent)
			tracing.SetPropagator() // each pod's status write continues the pod's trace
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if pprofListen != "" {
				if _, err := servePprof(ctx, pprofListen); err != nil {
					return err
				}
			}
			m, err := controlplane.JoinReading(ctx, natsURL, "skiff-sim", controlplane.Reads{Kinds: simnode.Kinds()}, auth)
			if err != nil {
				return err
			}
			defer m.Close()
			simnode.ReadBoundPods(m.Informers) // the fleet is the process's only pod reader
			client := &apiclient.Client{T: apiclient.NATS{Conn: m.Conn, Subject: auth.ID.APISubject()}}
			_, err = m.Actors.Spawn("simnode", simnode.New(simnode.Config{Log: m.Log, Informers: m.Informers, Client: client,
				Nodes: count, Prefix: prefix, RenewInterval: renew, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}))
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "simulating %d nodes named %s0..%s%d (scale-test mode, no containers)\n", count, prefix, prefix, count-1)
			<-ctx.Done()
			return nil
		},
	}
	nodes.Flags().IntVar(&count, "count", 3, "how many nodes")
	nodes.Flags().StringVar(&prefix, "prefix", "sim-", "node name prefix")
	nodes.Flags().DurationVar(&renew, "renew-interval", 0, "how often each node renews its lease (default: a quarter of the 40 s lease, as a kubelet); shorter compresses hours of heartbeats into minutes")
	nodes.Flags().StringVar(&natsURL, "nats-url", defaultNATSURL, "the control plane's NATS (default: the one the instance in --data-dir runs)")
	nodes.Flags().StringVar(&natsCreds, "nats-creds", "", "admin NATS credentials `FILE` (from \"skiff nats-creds --role admin\"); default: minted from --data-dir's keys when NATS is secured")
	nodes.Flags().StringVar(&dataDir, "data-dir", defaultDataDir(), "the local control plane's data directory, for its NATS keys and URL (default: the --kubeconfig's directory when skiff up wrote it)")
	nodes.Flags().StringVar(&pprofListen, "pprof-listen", "", "serve net/http/pprof (/debug/pprof/) on this `ADDR`, unauthenticated, e.g. 127.0.0.1:6060 (default: off)")
	sim.AddCommand(nodes)
	return sim
}

// servePprof serves net/http/pprof on addr until ctx ends: the simulated nodes have no API of
// their own to put it behind (skiff up's is behind the API's authentication), so it is off
// unless asked for, for a profiling run on a loopback address. It returns the address served.
func servePprof(ctx context.Context, addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr(), nil
}
