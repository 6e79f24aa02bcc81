package tracestream

import "github.com/skiff-sh/skiff/internal/metrics"

var dropped = metrics.Counter("skiff_trace_stream_dropped_spans_total",
	"Spans not kept in the trace stream: its queue was full or a publish failed.").WithLabelValues()
