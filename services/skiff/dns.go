package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/actors/clusterdns"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/bus/identity"
)

// dnsGCPercent is `skiff dns`'s GOGC unless the environment sets one. Its live heap is the zone
// and the informers' small objects, steady between Service changes, and Go's default (100)
// lets the heap grow to twice that before collecting, which the runtime then keeps mapped:
// half the headroom is a fifth less memory at 1,000 Services and about the same queries/s in
// the DNS benchmark (25 cost a quarter of them). A CoreDNS user can set GOGC the same way; the
// benchmark shows CoreDNS at both.
const dnsGCPercent = 50

// dnsGC applies dnsGCPercent unless GOGC is set.
func dnsGC() { defaultGCPercent(dnsGCPercent) }

// newDNS runs the cluster DNS server without the rest of a node: joined to the control plane
// through NATS with its own informers, for hosts outside the pod network, and so its memory
// can be measured alone (the DNS benchmark).
func newDNS() *cobra.Command {
	var natsURL, natsCreds, name, listen, domain string
	var upstreams []string
	// For the DNS benchmark's share of a node agent: the agent's informers keep whole objects
	// (its proxy reads them), and the same process without the server is its baseline.
	var wholeObjects, noServer bool
	cmd := &cobra.Command{
		Use:   "dns",
		Short: "Run the cluster DNS server alone (no kubelet or proxy), joined to a Skiff control plane through NATS",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := netip.ParseAddrPort(listen); err != nil {
				return fmt.Errorf("--listen %q: want ip:port: %w", listen, err)
			}
			for _, u := range upstreams {
				if _, err := netip.ParseAddr(u); err != nil {
					if _, err := netip.ParseAddrPort(u); err != nil {
						return fmt.Errorf("--upstream %q: want ip or ip:port", u)
					}
				}
			}
			dnsGC()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// It reads what a node's DNS server reads, so it joins as a node, keeping only the
			// kinds DNS answers from.
			m, err := controlplane.JoinReading(ctx, natsURL, "skiff-dns-"+name,
				controlplane.Reads{Kinds: clusterdns.Kinds(), Untraced: true},
				controlplane.NATSAuth{Creds: natsCreds, ID: identity.NodeID(name)})
			if err != nil {
				return err
			}
			defer m.Close()
			logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
			s := clusterdns.New(clusterdns.Config{Informers: m.Informers, OwnInformers: !wholeObjects, NodeName: name, Domain: domain, Listen: listen,
				Upstreams: upstreams, Logger: logger})
			if noServer {
				if !s.WaitForSync(ctx) {
					return nil
				}
				// A process that serves allocates and so collects; this one would not again
				// before its memory is read, and its last collection ran during the snapshot.
				runtime.GC()
				fmt.Fprintln(cmd.OutOrStdout(), "skiff dns informers synced, not serving")
				<-ctx.Done()
				return nil
			}
			if _, err := m.Actors.Spawn("clusterdns", s.Producer()); err != nil {
				return err
			}
			// The address is known once the informers have synced (port 0 picks one).
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for s.Addr() == "" {
				select {
				case <-ctx.Done():
					return nil
				case <-tick.C:
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "skiff dns serving on %s\n", s.Addr())
			<-ctx.Done()
			return nil
		},
	}
	host, _ := os.Hostname()
	f := cmd.Flags()
	f.StringVar(&listen, "listen", net.JoinHostPort("127.0.0.1", "53"), "ip:port to answer on over UDP and TCP (port 0 picks one)")
	f.StringSliceVar(&upstreams, "upstream", nil, "resolvers (ip or ip:port) for names outside the cluster (default: the non-loopback nameservers of /etc/resolv.conf)")
	f.StringVar(&domain, "cluster-domain", clusterdns.DefaultDomain, "the cluster's DNS domain")
	f.StringVar(&name, "node-name", host, "the node identity it joins NATS as")
	f.StringVar(&natsURL, "nats-url", defaultNATSURL, "the control plane's NATS")
	f.StringVar(&natsCreds, "nats-creds", "", "a node's NATS credentials `FILE` (from \"skiff nats-creds --node NAME\"); needed when NATS is secured")
	f.BoolVar(&wholeObjects, "whole-objects", false, "cache whole Services and EndpointSlices, as a node agent's informers shared with its proxy do")
	f.BoolVar(&noServer, "no-server", false, "sync the informers and their index, then serve nothing (a baseline for measuring the server's memory)")
	_ = f.MarkHidden("whole-objects")
	_ = f.MarkHidden("no-server")
	return cmd
}
