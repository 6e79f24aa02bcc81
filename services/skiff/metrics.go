package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/skiff-sh/skiff/internal/metrics"
)

func (n *nodeFlags) metricsFlag(f *pflag.FlagSet) {
	f.StringVar(&n.metricsListen, "metrics-listen", metrics.DefaultListen,
		`serve Prometheus /metrics here when this process runs no apiserver (which serves /metrics itself); "" = off`)
}

// serveMetrics serves /metrics on --metrics-listen. The default address being taken (two
// processes on one host) costs a warning; an address asked for explicitly must work.
func (n *nodeFlags) serveMetrics(ctx context.Context, cmd *cobra.Command, logger *slog.Logger) error {
	if _, err := metrics.Serve(ctx, n.metricsListen, logger); err != nil {
		if cmd.Flags().Changed("metrics-listen") {
			return fmt.Errorf("--metrics-listen: %w", err)
		}
		logger.Warn("no /metrics: the default metrics address is taken", "addr", n.metricsListen, "err", err)
	}
	return nil
}
