package spanstore

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// MissingParent labels spans whose parent never reached the store (the CLI or another
// process did not export it).
const MissingParent = "(client span not recorded)"

// Line is one row of a waterfall: a span, or the idle gap before a span.
type Line struct {
	Depth     int
	Component string
	Operation string
	Offset    time.Duration // from the trace's start
	Duration  time.Duration
	Gap       bool // idle time between a parent's start (or its previous child's end) and a child
	Error     string
}

// A gap gets a line of its own when it is at least gapMin and 1/gapShare of the trace's width;
// smaller gaps are noise.
const (
	gapMin   = time.Millisecond
	gapShare = 20
)

// Waterfall lays spans out as a tree: children under their parent by start time, each line's
// offset from the trace's start, and a gap line wherever a parent waited for its next child.
func Waterfall(spans []Span) []Line {
	if len(spans) == 0 {
		return nil
	}
	byID := map[string]bool{}
	start, end := spans[0].Start, spans[0].End
	for _, s := range spans {
		byID[s.SpanID] = true
		if s.Start.Before(start) {
			start = s.Start
		}
		if s.End.After(end) {
			end = s.End
		}
	}
	minGap := max(gapMin, end.Sub(start)/gapShare)
	children := map[string][]Span{}
	var roots, orphans []Span
	for _, s := range spans {
		switch {
		case s.ParentID == "":
			roots = append(roots, s)
		case !byID[s.ParentID]:
			orphans = append(orphans, s)
		default:
			children[s.ParentID] = append(children[s.ParentID], s)
		}
	}
	var out []Line
	// Spans come from other processes too: a span id seen twice or a parent cycle must not
	// loop, so each id's children are drawn once.
	expanded := map[string]bool{}
	var walk func(s Span, depth int)
	walk = func(s Span, depth int) {
		out = append(out, Line{Depth: depth, Component: s.Component(), Operation: s.Name, Offset: s.Start.Sub(start), Duration: s.End.Sub(s.Start), Error: s.Error})
		if expanded[s.SpanID] {
			return
		}
		expanded[s.SpanID] = true
		kids := children[s.SpanID]
		sortByStart(kids)
		busy := s.Start
		for _, c := range kids {
			if idle := c.Start.Sub(busy); idle >= minGap {
				out = append(out, Line{Depth: depth + 1, Gap: true, Operation: "gap " + FormatDuration(idle), Offset: busy.Sub(start), Duration: idle})
			}
			walk(c, depth+1)
			if c.End.After(busy) {
				busy = c.End
			}
		}
	}
	sortByStart(roots)
	for _, r := range roots {
		walk(r, 0)
	}
	for _, s := range spans { // members of a parent cycle hang under no root: show them too
		if s.ParentID != "" && byID[s.ParentID] && !expanded[s.SpanID] && !expanded[s.ParentID] {
			orphans = append(orphans, s)
			expanded[s.ParentID] = true
		}
	}
	if len(orphans) > 0 {
		sortByStart(orphans)
		first, last := orphans[0].Start, orphans[0].End
		for _, o := range orphans {
			if o.End.After(last) {
				last = o.End
			}
		}
		out = append(out, Line{Component: "?", Operation: MissingParent, Offset: first.Sub(start), Duration: last.Sub(first)})
		for _, o := range orphans {
			walk(o, 1)
		}
	}
	return out
}

func sortByStart(s []Span) {
	sort.SliceStable(s, func(i, j int) bool { return s[i].Start.Before(s[j].Start) })
}

// Render writes the waterfall as text: component, indented operation, start offset, duration
// and a bar scaled to the whole trace (gaps drawn dotted); barWidth 0 means 40.
func Render(w io.Writer, spans []Span, barWidth int) error {
	if barWidth <= 0 {
		barWidth = 40
	}
	lines := Waterfall(spans)
	var total time.Duration
	compW, opW := len("COMPONENT"), len("OPERATION")
	for _, l := range lines {
		total = max(total, l.Offset+l.Duration)
		compW = max(compW, utf8.RuneCountInString(l.Component))
		opW = max(opW, 2*l.Depth+utf8.RuneCountInString(l.Operation))
	}
	row := "%-*s  %-*s  %10s  %10s  %s\n"
	if _, err := fmt.Fprintf(w, row, compW, "COMPONENT", opW, "OPERATION", "START", "DURATION", "|"+strings.Repeat(" ", barWidth)+"| "+FormatDuration(total)); err != nil {
		return err
	}
	for _, l := range lines {
		op := strings.Repeat("  ", l.Depth) + l.Operation
		dur := FormatDuration(l.Duration)
		if l.Error != "" {
			dur += " !"
		}
		offset := "+" + FormatDuration(l.Offset)
		if l.Gap {
			offset, dur = "", ""
		}
		if _, err := fmt.Fprintf(w, row, compW, l.Component, opW, op, offset, dur, "|"+bar(l, total, barWidth)+"|"); err != nil {
			return err
		}
	}
	return nil
}

// bar draws the line's interval on a barWidth-cell scale of the trace: '█' for work, '·' for
// a gap; every span shows at least one cell.
func bar(l Line, total time.Duration, width int) string {
	cells := []rune(strings.Repeat(" ", width))
	if total <= 0 {
		total = 1
	}
	from := int(int64(l.Offset) * int64(width) / int64(total))
	to := int((int64(l.Offset+l.Duration)*int64(width) + int64(total) - 1) / int64(total))
	from = min(max(from, 0), width-1)
	to = min(max(to, from+1), width)
	mark := '█'
	if l.Gap {
		mark = '·'
	}
	for i := from; i < to; i++ {
		cells[i] = mark
	}
	return string(cells)
}

// FormatDuration is a short duration: 850µs, 12.3ms, 1.24s.
func FormatDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}
