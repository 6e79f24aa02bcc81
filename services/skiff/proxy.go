package main

import (
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/actors/proxy"
	"github.com/skiff-sh/skiff/bpf/nodeport"
)

func newProxy(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "proxy", Short: "Inspect the node's eBPF Service proxy", SilenceUsage: true}
	dump := dumpCmd("Print the Service ports and backends programmed on this node (run as root on the node)", "proxy's maps",
		proxy.DefaultPinDir, func(cmd *cobra.Command, dir string) error {
			ds, err := proxy.ReadPinned(dir)
			if err != nil {
				return fmt.Errorf("reading %s (is the proxy running on this node, and are you root?): %w", dir, err)
			}
			ext, err := proxy.ReadPinnedExternal(dir)
			if err != nil {
				return fmt.Errorf("reading %s: %w", dir, err)
			}
			if err := writeProxyDump(cmd.OutOrStdout(), ds); err != nil {
				return err
			}
			if err := writeExternalDump(cmd.OutOrStdout(), ext); err != nil {
				return err
			}
			return writeAttachLine(cmd.OutOrStdout(), "\nnode port programs", filepath.Join(dir, "nodeport", "links"), nodeport.FilterPrefix)
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

// writeExternalDump prints the tc entries for outside traffic (node ports, LoadBalancer
// addresses); a backend on this node is marked (local): it sees the client's address.
func writeExternalDump(w io.Writer, es []nodeport.Entry) error {
	if len(es) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "EXTERNAL\tBACKENDS")
	for _, e := range es {
		bes := make([]string, len(e.Backends))
		for i, b := range e.Backends {
			bes[i] = netip.AddrPortFrom(b.Addr, b.Port).String()
			if b.Local {
				bes[i] += "(local)"
			}
		}
		list := strings.Join(bes, ",")
		if list == "" {
			list = "<none>"
		}
		fmt.Fprintf(tw, "%s\t%s\n", e.Key, list)
	}
	return tw.Flush()
}
