package tracing

import (
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// HeartbeatSampleRate is the fraction of heartbeat traces kept: a node renews its lease every
// 10 s and reports status every minute, and keeping all of them would bury what users did.
const HeartbeatSampleRate = 0.01

// heartbeatSampler samples traces that start at a heartbeat (a lease renewal or a node status
// write with no caller's trace around it) at HeartbeatSampleRate by trace id, and follows the
// parent's decision, or keeps the trace, everywhere else.
type heartbeatSampler struct{ heartbeat, rest sdktrace.Sampler }

func newHeartbeatSampler() sdktrace.Sampler {
	return heartbeatSampler{
		heartbeat: sdktrace.TraceIDRatioBased(HeartbeatSampleRate),
		rest:      sdktrace.ParentBased(sdktrace.AlwaysSample()),
	}
}

func (h heartbeatSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if !trace.SpanContextFromContext(p.ParentContext).IsValid() && IsHeartbeat(p.Name) {
		return h.heartbeat.ShouldSample(p)
	}
	return h.rest.ShouldSample(p)
}

func (h heartbeatSampler) Description() string { return "HeartbeatSampler" }

// IsHeartbeat reports whether an API request span's name ("<verb> <resource>[/<sub>]") is a
// heartbeat's: an update or patch of a lease or of a node's status.
func IsHeartbeat(name string) bool {
	verb, what, _ := strings.Cut(name, " ")
	return (verb == "update" || verb == "patch") && (what == "leases" || what == "nodes/status")
}
