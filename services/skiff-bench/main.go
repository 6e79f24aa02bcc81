// Command skiff-bench prints Skiff's benchmark tables (go tool task bench). Each suite runs
// against real parts on this machine: an embedded JetStream server, the HTTP API, kernel eBPF.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/skiff-sh/skiff/actors/scheduler/framework"
	"github.com/skiff-sh/skiff/services/skiff-bench/apibench"
	"github.com/skiff-sh/skiff/services/skiff-bench/dnsbench"
	"github.com/skiff-sh/skiff/services/skiff-bench/durabench"
	"github.com/skiff-sh/skiff/services/skiff-bench/kubeletbench"
	"github.com/skiff-sh/skiff/services/skiff-bench/lbbench"
	"github.com/skiff-sh/skiff/services/skiff-bench/npbench"
	"github.com/skiff-sh/skiff/services/skiff-bench/schedbench"
	"github.com/skiff-sh/skiff/services/skiff-bench/statelogbench"
	"github.com/skiff-sh/skiff/services/skiff-bench/systembench"
)

type suite struct {
	name string
	run  func(w io.Writer) error
}

func main() {
	only := flag.String("only", "", "comma-separated suites to run (default: all)")
	var system systembench.Options
	flag.IntVar(&system.Nodes, "system-nodes", 5000, "system suite: simulated nodes")
	flag.IntVar(&system.Pods, "system-pods", 10000, "system suite: replicas of the Deployment as applied")
	flag.IntVar(&system.ScaleTo, "system-scale-to", 0, "system suite: replicas it is then scaled to (default 3 × -system-pods; -1: no second phase)")
	flag.StringVar(&system.ProfileDir, "system-profile-dir", "", "system suite: keep the CPU profiles of skiff up, the simulated nodes and the bench, and skiff up's heap profile at the end of each phase, here")
	var dnsOpts dnsbench.Options
	flag.Func("dns-sizes", "dns suite: comma-separated Service counts (default 1000,10000)", func(v string) error {
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				return fmt.Errorf("-dns-sizes: %q is not a positive count", f)
			}
			dnsOpts.Sizes = append(dnsOpts.Sizes, n)
		}
		return nil
	})
	flag.Parse()
	suites := []suite{
		{"statelog", statelogbench.RunBench},
		{"durable", durabench.Run},
		{"api", func(w io.Writer) error { return apibench.Run(w, apibench.Options{}) }},
		{"tracing", func(w io.Writer) error { return apibench.RunTracingOverhead(w, apibench.Options{}) }},
		{"framework", framework.RunBench},
		{"scheduler", func(w io.Writer) error { return schedbench.Run(w, schedbench.Options{}) }},
		{"lb", func(w io.Writer) error { return lbbench.Run(w, lbbench.Options{}) }},
		{"netpol", func(w io.Writer) error { return npbench.Run(w, npbench.Options{}) }},
		{"kubelet", kubeletbench.RunBench},
		{"dns", func(w io.Writer) error { return dnsbench.Run(w, dnsOpts) }},
		{"system", func(w io.Writer) error { return systembench.Run(w, system) }},
	}
	want := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if s != "" {
			want[s] = true
		}
	}
	failed := false
	for _, s := range suites {
		if len(want) > 0 && !want[s.name] {
			continue
		}
		fmt.Printf("== %s\n", s.name)
		start := time.Now()
		if err := s.run(os.Stdout); err != nil {
			fmt.Printf("%s: %v\n", s.name, err)
			failed = true
		}
		fmt.Printf("(%s took %v)\n\n", s.name, time.Since(start).Round(time.Millisecond))
	}
	if failed {
		os.Exit(1)
	}
}
