// Command skiff-bench prints Skiff's benchmark tables (go tool task bench). Each suite runs
// against real parts on this machine: an embedded JetStream server, the HTTP API, kernel eBPF.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/skiff-sh/skiff/actors/apiserver/apibench"
	"github.com/skiff-sh/skiff/actors/kubelet/kubeletbench"
	"github.com/skiff-sh/skiff/actors/scheduler/framework"
	"github.com/skiff-sh/skiff/actors/scheduler/schedbench"
	"github.com/skiff-sh/skiff/bpf/lbbench"
	"github.com/skiff-sh/skiff/bus/statelog/statelogbench"
)

type suite struct {
	name string
	run  func(w io.Writer) error
}

func main() {
	only := flag.String("only", "", "comma-separated suites to run (default: all)")
	flag.Parse()
	suites := []suite{
		{"statelog", statelogbench.RunBench},
		{"api", func(w io.Writer) error { return apibench.Run(w, apibench.Options{}) }},
		{"tracing", func(w io.Writer) error { return apibench.RunTracingOverhead(w, apibench.Options{}) }},
		{"framework", framework.RunBench},
		{"scheduler", func(w io.Writer) error { return schedbench.Run(w, schedbench.Options{}) }},
		{"lb", func(w io.Writer) error { return lbbench.Run(w, lbbench.Options{}) }},
		{"kubelet", kubeletbench.RunBench},
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
