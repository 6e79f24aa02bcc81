package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/actors/proxy"
)

func newProxy(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "proxy", Short: "Inspect the node's eBPF Service proxy", SilenceUsage: true}
	var node, pinDir string
	dump := &cobra.Command{
		Use:   "dump",
		Short: "Print the Service ports and backends programmed on this node (run as root on the node)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := pinDir
			if dir == "" {
				if node == "" {
					host, err := os.Hostname()
					if err != nil {
						return err
					}
					node = host
				}
				dir = proxy.DefaultPinDir(node)
			}
			ds, err := proxy.ReadPinned(dir)
			if err != nil {
				return fmt.Errorf("reading %s (is the proxy running on this node, and are you root?): %w", dir, err)
			}
			return writeProxyDump(cmd.OutOrStdout(), ds)
		},
	}
	dump.Flags().StringVar(&node, "node", "", "node name (default: the hostname)")
	dump.Flags().StringVar(&pinDir, "pin-dir", "", "bpffs directory of the proxy's maps (default "+proxy.DefaultPinDir("<node>")+")")
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
