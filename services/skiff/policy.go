package main

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/actors/netpol"
	"github.com/skiff-sh/skiff/bpf/policy"
	"github.com/skiff-sh/skiff/bpf/tcattach"
)

func newPolicy(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "Inspect the node's eBPF NetworkPolicy enforcement", SilenceUsage: true}
	dump := dumpCmd("Print the isolated pods, their allowed peers and ports, and the counters on this node (run as root on the node)",
		"policy maps", netpol.DefaultPinDir, func(cmd *cobra.Command, dir string) error {
			s, err := policy.ReadPinned(dir)
			if err != nil {
				return fmt.Errorf("reading %s (is the agent running on this node, and are you root?): %w", dir, err)
			}
			if err := writePolicyDump(cmd.OutOrStdout(), s); err != nil {
				return err
			}
			return writeAttachLine(cmd.OutOrStdout(), "policy programs", filepath.Join(dir, "links"), policy.FilterPrefix)
		})
	cmd.AddCommand(dump)
	return cmd
}

// writePolicyDump prints one row per rule entry (a pod isolated with no entry in a direction
// allows nothing there), then the node's addresses and the counters.
func writePolicyDump(w io.Writer, s policy.State) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tISOLATED\tDIRECTION\tPEER\tPORTS")
	pods := slices.SortedFunc(func(yield func(k string) bool) {
		for ip := range s.Endpoints {
			if !yield(ip.String()) {
				return
			}
		}
	}, strings.Compare)
	keys := make([]policy.RuleKey, 0, len(s.Rules))
	for k := range s.Rules {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b policy.RuleKey) int {
		return cmp.Or(a.Pod.Compare(b.Pod), cmp.Compare(a.Dir, b.Dir), a.Peer.Addr().Compare(b.Peer.Addr()), cmp.Compare(a.Peer.Bits(), b.Peer.Bits()))
	})
	for _, pod := range pods {
		var ep policy.Endpoint
		for ip, e := range s.Endpoints {
			if ip.String() == pod {
				ep = e
			}
		}
		iso := isolation(ep)
		rows := 0
		for _, k := range keys {
			if k.Pod.String() != pod {
				continue
			}
			ports := make([]string, len(s.Rules[k]))
			for i, p := range s.Rules[k] {
				ports[i] = p.String()
			}
			list := strings.Join(ports, ",")
			if list == "" {
				list = "<none>"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", pod, iso, k.Dir, k.Peer, list)
			rows++
		}
		if rows == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t<none>\t<none>\n", pod, iso)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	hosts := make([]string, len(s.HostAddrs))
	for i, a := range s.HostAddrs {
		hosts[i] = a.String()
	}
	fmt.Fprintf(w, "\nnode addresses (always admitted): %s\n", strings.Join(hosts, ","))
	fmt.Fprintf(w, "tracked flows: %d; new flows allowed by policy: %d, unisolated: %d; packets denied: %d, of tracked flows: %d\n",
		s.Tracked, s.Stats.Allowed, s.Stats.Unisolated, s.Stats.Denied, s.Stats.Tracked)
	return nil
}

// writeAttachLine says how the programs sit on this node's interfaces (tcx links, or legacy
// tc filters on a kernel before 6.6), counted where they are: pins and filters.
func writeAttachLine(w io.Writer, what, linkDir, prefix string) error {
	c, err := tcattach.Count(linkDir, prefix)
	if err != nil {
		return fmt.Errorf("counting %s attachments: %w", what, err)
	}
	_, err = fmt.Fprintf(w, "%s attached by: %s\n", what, c)
	return err
}

func isolation(e policy.Endpoint) string {
	switch {
	case e.Ingress && e.Egress:
		return "ingress,egress"
	case e.Egress:
		return "egress"
	}
	return "ingress"
}
