package tracing

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/trace"
)

// maxLinks bounds what one key collects: a hot object must not grow its next sync's links
// without end; the oldest are dropped.
const maxLinks = 16

// Links collects, per work-queue key, the trace contexts of the writes (or probe results) a
// level-triggered worker merges into one sync. The sync continues the newest write's trace
// and links to the others, so no cause is lost from the traces.
type Links struct {
	mu sync.Mutex
	m  map[string][]trace.SpanContext
}

// Add records the span context ctx carries, if any, as a cause of key's next sync.
func (l *Links) Add(key string, ctx context.Context) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string][]trace.SpanContext{}
	}
	cur := l.m[key]
	for _, c := range cur {
		if same(c, sc) {
			return
		}
	}
	if len(cur) == maxLinks {
		cur = cur[1:]
	}
	l.m[key] = append(cur, sc)
}

// Take removes key's causes and returns them as links, leaving out the ones in skip (the
// parent the sync continues).
func (l *Links) Take(key string, skip ...trace.SpanContext) []trace.Link {
	l.mu.Lock()
	cur := l.m[key]
	delete(l.m, key)
	l.mu.Unlock()
	var out []trace.Link
next:
	for _, sc := range cur {
		for _, s := range skip {
			if same(s, sc) {
				continue next
			}
		}
		out = append(out, trace.Link{SpanContext: sc})
	}
	return out
}

// Forget drops what key collected (the object is gone).
func (l *Links) Forget(key string) {
	l.mu.Lock()
	delete(l.m, key)
	l.mu.Unlock()
}

// same compares span identity only: a context extracted from a header is remote, one taken
// from a live span is not, and both name the same span.
func same(a, b trace.SpanContext) bool {
	return a.TraceID() == b.TraceID() && a.SpanID() == b.SpanID()
}
