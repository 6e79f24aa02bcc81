// Package lbbench measures Skiff's eBPF socket load balancer against a
// kube-proxy-style iptables ruleset, side by side in one run: time to
// program N Services, time to apply one endpoint change, and TCP connect
// latency to a ClusterIP. Everything happens in a private network namespace
// and a private cgroup, so the host's rules and sockets are untouched.
package lbbench

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
	"github.com/skiff-sh/skiff/testkit/tcpsink"
)

// Options tunes the run; zero fields take the defaults.
type Options struct {
	Sizes              []int // Service counts (default 1000, 10000)
	BackendsPerService int   // default 2
	Connects           int   // timed connects per size and dataplane (default 2000)
	Changes            int   // endpoint changes per size; the median is reported (default 5)
}

func (o Options) withDefaults() Options {
	if len(o.Sizes) == 0 {
		o.Sizes = []int{1000, 10000}
	}
	if o.BackendsPerService <= 0 {
		o.BackendsPerService = 2
	}
	if o.Connects <= 0 {
		o.Connects = 2000
	}
	if o.Changes <= 0 {
		o.Changes = 5
	}
	return o
}

// result is one dataplane at one size.
type result struct {
	program, change time.Duration
	p50, p99        time.Duration
}

// Run executes the benchmark and writes one table to w. Without root it
// writes why it skipped and returns nil.
func Run(w io.Writer, opts Options) error {
	opts = opts.withDefaults()
	if os.Geteuid() != 0 {
		fmt.Fprintln(w, "lbbench: skipped: needs root (eBPF programs, a network namespace, iptables, cgroup2)")
		return nil
	}
	for _, n := range opts.Sizes {
		if n <= 0 || n > 1<<20-2 {
			return fmt.Errorf("lbbench: size %d out of range", n)
		}
	}
	ns, err := newNetns()
	if err != nil {
		return fmt.Errorf("lbbench: %w", err)
	}
	defer ns.Close()
	// Listeners for every backend a workload can name, inside the namespace.
	err = ns.Do(func() error {
		for _, be := range backendsOf(opts.BackendsPerService+1, false) {
			ln, err := tcpsink.Listen(be.String())
			if err != nil {
				return err
			}
			_ = ln // closed with the namespace thread's process exit
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("lbbench: backends: %w", err)
	}
	cg, err := newCgroup()
	if err != nil {
		return fmt.Errorf("lbbench: %w", err)
	}
	defer cg.close()

	ebpfRes := make([]result, len(opts.Sizes))
	iptRes := make([]result, len(opts.Sizes))
	for i, n := range opts.Sizes {
		if ebpfRes[i], err = runEBPF(ns, cg, n, opts); err != nil {
			return fmt.Errorf("lbbench: eBPF, %d services: %w", n, err)
		}
		if iptRes[i], err = runIptables(ns, n, opts); err != nil {
			return fmt.Errorf("lbbench: iptables, %d services: %w", n, err)
		}
	}
	writeTable(w, opts, ebpfRes, iptRes)
	return nil
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// target is the ClusterIP connects go to: the last Service, the worst
// case for a linear KUBE-SERVICES scan (a hash lookup does not care).
func target(n int) netip.AddrPort { return netip.AddrPortFrom(vipOf(n-1), svcPort) }

func runIptables(ns *benchutil.NSThread, n int, opts Options) (result, error) {
	var r result
	b := opts.BackendsPerService
	err := ns.Do(func() error {
		var err error
		if r.program, err = restore(ruleset(n, b, n/2, false)); err != nil {
			return err
		}
		var changes []time.Duration
		for c := range opts.Changes {
			d, err := restore(ruleset(n, b, n/2, c%2 == 0))
			if err != nil {
				return err
			}
			changes = append(changes, d)
		}
		r.change = median(changes)
		r.p50, r.p99, err = benchutil.ConnectLatency(target(n), opts.Connects)
		// Leave an empty nat table for the next size and the eBPF runs.
		_, ferr := restore([]byte("*nat\nCOMMIT\n"))
		return errors.Join(err, ferr)
	})
	return r, err
}

func writeTable(w io.Writer, opts Options, e, ipt []result) {
	fmt.Fprintf(w, "Service dataplane: eBPF socket LB vs kube-proxy-style iptables (%s)\n", iptablesVersion())
	fmt.Fprintf(w, "%d backends/Service; connect latency over %d blocking TCP connects to the last ClusterIP; endpoint change = median of %d (iptables: full-table restore, as a kube-proxy full sync)\n",
		opts.BackendsPerService, opts.Connects, opts.Changes)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tservices\teBPF\tiptables\tiptables/eBPF\t")
	rows := []struct {
		name string
		get  func(result) time.Duration
	}{
		{"program all Services", func(r result) time.Duration { return r.program }},
		{"one endpoint change", func(r result) time.Duration { return r.change }},
		{"connect p50", func(r result) time.Duration { return r.p50 }},
		{"connect p99", func(r result) time.Duration { return r.p99 }},
	}
	for _, row := range rows {
		for i, n := range opts.Sizes {
			a, b := row.get(e[i]), row.get(ipt[i])
			ratio := "-"
			if a > 0 {
				ratio = fmt.Sprintf("%.1fx", float64(b)/float64(a))
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t\n", row.name, n, human(a), human(b), ratio)
		}
	}
	tw.Flush()
}

// human prints three significant digits in the unit that fits.
func human(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.3gs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.3gms", float64(d)/float64(time.Millisecond))
	case d >= time.Microsecond:
		return fmt.Sprintf("%.3gµs", float64(d)/float64(time.Microsecond))
	}
	return fmt.Sprintf("%dns", d.Nanoseconds())
}
