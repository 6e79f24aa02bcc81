package tracing

import (
	"strings"
	"sync"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/skiff-sh/skiff/internal/spanstore"
)

// HeartbeatSampleRate is the fraction of heartbeat traces kept: a node renews its lease every
// 10 s and reports status every minute, and keeping all of them would bury what users did.
const HeartbeatSampleRate = 0.01

// budgetTraces is how many traces' span counts a budget remembers per generation; a trace
// unseen for a whole generation starts counting afresh (a long-quiet trace is rare, and its
// spans are still bounded by the store).
const budgetTraces = 4096

// sampler samples traces that start at a heartbeat (a lease renewal or a node status write
// with no caller's trace around it) at HeartbeatSampleRate by trace id, and follows the
// parent's decision, or keeps the trace, everywhere else; of a kept trace it records no more
// spans than a span store keeps of it (spanstore.DefaultMaxSpansPerTrace). A rollout of
// 10,000 pods is one trace; recording, streaming and storing spans the store then drops cost
// the control plane about 5% of its CPU and 20-60 MiB of heap. A span over budget is
// dropped, and so is the work under it (parent-based), so what is kept is whole subtrees: the
// first pods of the rollout end to end.
type sampler struct {
	heartbeat, rest sdktrace.Sampler
	budget          *spanBudget
}

func newSampler() sdktrace.Sampler {
	return sampler{
		heartbeat: sdktrace.TraceIDRatioBased(HeartbeatSampleRate),
		rest:      sdktrace.ParentBased(sdktrace.AlwaysSample()),
		budget:    newSpanBudget(spanstore.DefaultMaxSpansPerTrace, budgetTraces),
	}
}

func (s sampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	var res sdktrace.SamplingResult
	if !trace.SpanContextFromContext(p.ParentContext).IsValid() && IsHeartbeat(p.Name) {
		res = s.heartbeat.ShouldSample(p)
	} else {
		res = s.rest.ShouldSample(p)
	}
	if res.Decision == sdktrace.RecordAndSample && !s.budget.take(p.TraceID) {
		res.Decision = sdktrace.Drop
	}
	return res
}

func (s sampler) Description() string { return "HeartbeatSampler with a span budget per trace" }

// IsHeartbeat reports whether an API request span's name ("<verb> <resource>[/<sub>]") is a
// heartbeat's: an update or patch of a lease or of a node's status.
func IsHeartbeat(name string) bool {
	verb, what, _ := strings.Cut(name, " ")
	return (verb == "update" || verb == "patch") && (what == "leases" || what == "nodes/status")
}

// spanBudget counts the spans sampled per trace, in two generations of at most traces trace
// ids each, so its memory is bounded however many traces pass.
type spanBudget struct {
	limit, traces int

	mu        sync.Mutex
	cur, prev map[trace.TraceID]int
}

func newSpanBudget(limit, traces int) *spanBudget {
	return &spanBudget{limit: limit, traces: traces, cur: map[trace.TraceID]int{}}
}

// take counts one more span of trace id, unless the trace has used its budget.
func (b *spanBudget) take(id trace.TraceID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.cur[id]
	if !ok {
		n = b.prev[id]
		if len(b.cur) >= b.traces {
			b.prev, b.cur = b.cur, make(map[trace.TraceID]int, b.traces)
		}
	}
	if n >= b.limit {
		b.cur[id] = n
		return false
	}
	b.cur[id] = n + 1
	return true
}
