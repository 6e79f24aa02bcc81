package systembench

import (
	"fmt"
	"io"
	"time"

	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
)

const mib = 1 << 20

// writeTable prints one column per phase.
func (r *run) writeTable(w io.Writer, phases []*phase) error {
	cols := []string{fmt.Sprintf("system: %d nodes", r.o.Nodes)}
	total := 0
	for i, p := range phases {
		total += p.pods
		if i == 0 {
			cols = append(cols, fmt.Sprintf("first %d pods (apply)", p.pods))
		} else {
			cols = append(cols, fmt.Sprintf("next %d pods (scale to %d)", p.pods, total))
		}
	}
	t := benchutil.NewTable(w, cols...)
	row := func(name string, cell func(p *phase) any) {
		cells := []any{name}
		for _, p := range phases {
			cells = append(cells, cell(p))
		}
		t.Row(cells...)
	}
	row("pods Running/s, kubectl -> all Running", func(p *phase) any { return benchutil.Rate(p.pods, p.took) })
	row("kubectl -> all Running", func(p *phase) any { return p.took.Round(time.Millisecond) })
	for _, pct := range []string{"p50", "p99"} {
		row("create->Running "+pct+" (creationTimestamp, whole s -> bench watch)", func(p *phase) any {
			return percentile(p.fromCreated, pct)
		})
	}
	row("pods that stopped Running after they ran", func(p *phase) any { return p.stopped })
	row("server RSS peak (VmHWM), MiB", func(p *phase) any { return float64(p.up.peak) / mib })
	row("server RSS now (VmRSS), MiB", func(p *phase) any { return float64(p.up.now) / mib })
	row("server live heap after a forced GC, MiB", func(p *phase) any { return float64(p.heap.live) / mib })
	row("server heap spans in use / free kept from the OS, MiB", func(p *phase) any {
		return fmt.Sprintf("%.0f / %.0f", float64(p.heap.inuse)/mib, float64(p.heap.retained)/mib)
	})
	row("server goroutine stacks / Go runtime Sys, MiB", func(p *phase) any {
		return fmt.Sprintf("%.0f / %.0f", float64(p.heap.stacks)/mib, float64(p.heap.sys)/mib)
	})
	row("server VmRSS growth per pod, KiB", func(p *phase) any { return float64(p.upGrowth) / 1024 / float64(p.pods) })
	row("sim RSS peak (VmHWM), MiB", func(p *phase) any { return float64(p.sim.peak) / mib })
	row("sim RSS now (VmRSS), MiB", func(p *phase) any { return float64(p.sim.now) / mib })
	for i, who := range []string{"server", "sim", "bench (watches)"} {
		row(who+" CPU, cores busy on average", func(p *phase) any { return fmt.Sprintf("%.2f", p.cpu[i].Seconds()/p.took.Seconds()) })
	}
	// What a pod costs the system: how many writes, and the CPU of each. The writes include the
	// Lease renewals of every node (a tenth of the nodes a second), which are not the pods'.
	row("state-log writes/s, every kind (Lease renewals included)", func(p *phase) any { return benchutil.Rate(int(p.writes), p.took) })
	row("state-log writes per pod Running", func(p *phase) any { return fmt.Sprintf("%.1f", float64(p.writes)/float64(p.pods)) })
	row("server CPU per state-log write, us", func(p *phase) any { return perWrite(p.cpu[0], p.writes) })
	row("all three processes' CPU per pod Running, ms", func(p *phase) any {
		return fmt.Sprintf("%.2f", (p.cpu[0]+p.cpu[1]+p.cpu[2]).Seconds()*1000/float64(p.pods))
	})
	row("CPU per pod Running, ms: server / sim / bench", func(p *phase) any {
		ms := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(p.pods) }
		return fmt.Sprintf("%.2f / %.2f / %.2f", ms(p.cpu[0]), ms(p.cpu[1]), ms(p.cpu[2]))
	})
	row("nodes that went NotReady (since registration)", func(p *phase) any { return p.notReady })
	if err := t.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "(%d nodes Ready %v after sim start: %.0f nodes/s; RSS read when the last pod went Running; targets: >= 2000 pods/s, server RSS <= 1 GB at 10k pods, 0 NotReady)\n",
		r.o.Nodes, r.nodesReadyIn.Round(time.Millisecond), benchutil.Rate(r.o.Nodes, r.nodesReadyIn))
	return err
}

func perWrite(cpu time.Duration, writes uint64) any {
	if writes == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(cpu.Microseconds())/float64(writes))
}

func percentile(lat []time.Duration, which string) any {
	if len(lat) == 0 {
		return "-"
	}
	p50, p99 := benchutil.Percentiles(lat)
	if which == "p50" {
		return p50.Round(time.Millisecond)
	}
	return p99.Round(time.Millisecond)
}
