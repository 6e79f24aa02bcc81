package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/actors/proxy"
)

func newProxy(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "proxy", Short: "Inspect the node's eBPF Service proxy", SilenceUsage: true}
	dump := dumpCmd("Print the Service ports and backends programmed on this node (run as root on the node)", "proxy's maps",
		proxy.DefaultPinDir, func(cmd *cobra.Command, dir string) error {
			ds, err := proxy.ReadPinned(dir)
			if err != nil {
				return fmt.Errorf("reading %s (is the proxy running on this node, and are you root?): %w", dir, err)
			}
			return writeProxyDump(cmd.OutOrStdout(), ds)
		})
	cmd.AddCommand(dump)
	return cmd
}

// writeProxyDump prints one row per Service port: VIP:port/proto -> backends.
func writeProxyDump(w io.Writer, ds []proxy.ServiceDump) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tAFFINITY\tBACKENDS")
	for _, d := range ds {
		aff := "-"
		if d.AffinityTimeout > 0 {
			aff = "ClientIP " + d.AffinityTimeout.String()
		}
		bes := make([]string, len(d.Backends))
		for i, b := range d.Backends {
			bes[i] = b.String()
		}
		list := strings.Join(bes, ",")
		if list == "" {
			list = "<none>"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", d.Key, aff, list)
	}
	return tw.Flush()
}
