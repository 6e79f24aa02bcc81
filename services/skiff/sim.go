package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/simnode"
)

// newSim is the scale-test mode (like kwok): simulated nodes that register, renew leases and
// report bound pods Running without containers. It is never how real pods run.
func newSim() *cobra.Command {
	sim := &cobra.Command{Use: "sim", Short: "Scale-test mode: simulated nodes without containers (like kwok)"}
	var count int
	var prefix, natsURL string
	nodes := &cobra.Command{
		Use:   "nodes",
		Short: "Register simulated nodes and keep them alive until interrupted",
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := join(cmd.Context(), natsURL, "skiff-sim")
			if err != nil {
				return err
			}
			defer m.close()
			_, err = m.actors.Spawn("simnode", simnode.New(simnode.Config{Log: m.log, Client: &apiclient.Client{T: apiclient.NATS{Conn: m.nc}},
				Nodes: count, Prefix: prefix, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}))
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "simulating %d nodes named %s0..%s%d (scale-test mode, no containers)\n", count, prefix, prefix, count-1)
			<-m.ctx.Done()
			return nil
		},
	}
	nodes.Flags().IntVar(&count, "count", 3, "how many nodes")
	nodes.Flags().StringVar(&prefix, "prefix", "sim-", "node name prefix")
	nodes.Flags().StringVar(&natsURL, "nats-url", "nats://127.0.0.1:4222", "the control plane's NATS")
	sim.AddCommand(nodes)
	return sim
}
