package benchutil

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Table prints right-aligned columns.
type Table struct{ tw *tabwriter.Writer }

// NewTable writes the header row (the first column names the whole table).
func NewTable(w io.Writer, cols ...string) *Table {
	t := &Table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)}
	t.Row(toAny(cols)...)
	return t
}

// Row writes one row: a float64 as a whole number, anything else as fmt's %v.
func (t *Table) Row(cells ...any) {
	var b strings.Builder
	for _, c := range cells {
		if f, ok := c.(float64); ok {
			fmt.Fprintf(&b, "%.0f\t", f)
		} else {
			fmt.Fprintf(&b, "%v\t", c)
		}
	}
	fmt.Fprintln(t.tw, b.String())
}

// Flush writes the aligned table out.
func (t *Table) Flush() error { return t.tw.Flush() }

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// Store is a store under test by WriteVsWatch.
type Store struct {
	Title string
	// Sequential and Concurrent are how many objects each creates row makes; Workers how many
	// writers the concurrent row uses.
	Sequential, Concurrent, Workers int
	// Creates makes total objects (named with tag) from workers goroutines; it returns creates/s.
	Creates func(tag string, workers, total int) (float64, error)
	// WatchLatency measures write-to-event latency seen by n watchers.
	WatchLatency func(n int) (p50, p99 time.Duration, err error)
}

// WriteVsWatch prints the table the store benchmarks share: creates/s from one writer and from
// s.Workers, then watch latency with 1, 10 and 100 watchers.
func WriteVsWatch(w io.Writer, s Store) error {
	t := NewTable(w, s.Title, "value", "p50", "p99")
	rate, err := s.Creates("seq", 1, s.Sequential)
	if err != nil {
		return err
	}
	t.Row("creates/s sequential", rate, "", "")
	if rate, err = s.Creates("conc", s.Workers, s.Concurrent); err != nil {
		return err
	}
	t.Row(fmt.Sprintf("creates/s %d concurrent", s.Workers), rate, "", "")
	for _, n := range []int{1, 10, 100} {
		p50, p99, err := s.WatchLatency(n)
		if err != nil {
			return err
		}
		t.Row(fmt.Sprintf("watch latency, %d watchers", n), "", p50.Round(time.Microsecond), p99.Round(time.Microsecond))
	}
	return t.Flush()
}
