package spanstore

import (
	"fmt"
	"io"
	"time"
)

// Step is one span on a trace's critical path and how long the work waited before it began.
type Step struct {
	Span Span
	// Wait: from the moment the step's parent (or the parent's previous child) was last busy
	// to the step's start: a queue, a watch delivery, a back-off.
	Wait time.Duration
}

// CriticalPath is the chain of spans that led to the trace's last-ending span, root first:
// what the trace's end waited on. Each step holds the wait before it.
func CriticalPath(spans []Span) []Step {
	if len(spans) == 0 {
		return nil
	}
	byID := make(map[string]Span, len(spans))
	children := map[string][]Span{}
	last := spans[0]
	for _, s := range spans {
		byID[s.SpanID] = s
		children[s.ParentID] = append(children[s.ParentID], s)
		if s.End.After(last.End) {
			last = s
		}
	}
	var chain []Span
	seen := map[string]bool{}
	for s, ok := last, true; ok && !seen[s.SpanID]; s, ok = byID[s.ParentID] {
		seen[s.SpanID] = true
		chain = append(chain, s)
	}
	steps := make([]Step, len(chain))
	for i := range chain {
		s := chain[len(chain)-1-i]
		steps[i] = Step{Span: s}
		if parent, ok := byID[s.ParentID]; ok && i > 0 {
			steps[i].Wait = max(0, s.Start.Sub(lastBusy(parent, children[parent.SpanID], s)))
		}
	}
	return steps
}

// lastBusy is when parent was last busy before child began: its end when the child came
// after it (through the log, a queue), else its start or the end of the latest of its other
// children that finished by then.
func lastBusy(parent Span, siblings []Span, child Span) time.Time {
	busy := parent.Start
	if !parent.End.After(child.Start) {
		busy = parent.End
	}
	for _, c := range siblings {
		if c.SpanID != child.SpanID && !c.End.After(child.Start) && c.End.After(busy) {
			busy = c.End
		}
	}
	return busy
}

// RenderCriticalPath writes the critical path and names its longest wait.
func RenderCriticalPath(w io.Writer, spans []Span) error {
	steps := CriticalPath(spans)
	if len(steps) == 0 {
		return nil
	}
	start := spans[0].Start
	for _, s := range spans {
		if s.Start.Before(start) {
			start = s.Start
		}
	}
	end := steps[len(steps)-1].Span
	if _, err := fmt.Fprintf(w, "\ncritical path to the last span (%s %q, ends at +%s):\n", end.Component(), end.Name, FormatDuration(end.End.Sub(start))); err != nil {
		return err
	}
	longest := 0
	for i, st := range steps {
		wait := ""
		if st.Wait > 0 {
			wait = "waited " + FormatDuration(st.Wait)
		}
		if _, err := fmt.Fprintf(w, "  %-24s %-36s +%-9s %s\n", st.Span.Component(), st.Span.Name, FormatDuration(st.Span.Start.Sub(start)), wait); err != nil {
			return err
		}
		if st.Wait > steps[longest].Wait {
			longest = i
		}
	}
	if longest == 0 {
		_, err := fmt.Fprintln(w, "longest wait: none; the time went to the work itself")
		return err
	}
	st, before := steps[longest], steps[longest-1].Span
	_, err := fmt.Fprintf(w, "longest wait: %s before %s %q (after %s %q)\n",
		FormatDuration(st.Wait), st.Span.Component(), st.Span.Name, before.Component(), before.Name)
	return err
}
