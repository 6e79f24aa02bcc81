package benchutil

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"text/tabwriter"
	"time"
)

func TestParallelRunsEveryIndexOnce(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	if err := Parallel(4, 100, func(i int) error {
		mu.Lock()
		defer mu.Unlock()
		seen[i]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 100 {
		t.Fatalf("ran %d distinct indices, want 100", len(seen))
	}
	for i := 1; i <= 100; i++ {
		if seen[i] != 1 {
			t.Fatalf("index %d ran %d times", i, seen[i])
		}
	}
}

func TestParallelReturnsAnError(t *testing.T) {
	boom := errors.New("boom")
	err := Parallel(3, 50, func(i int) error {
		if i == 7 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
}

func TestPercentiles(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	p50, p99 := Percentiles(lat)
	if p50 != 51*time.Millisecond || p99 != 100*time.Millisecond {
		t.Fatalf("p50 %v p99 %v", p50, p99)
	}
}

func TestWriteVsWatchTable(t *testing.T) {
	var buf bytes.Buffer
	err := WriteVsWatch(&buf, Store{
		Title: "store", Sequential: 10, Concurrent: 20, Workers: 4,
		Creates: func(tag string, workers, total int) (float64, error) { return float64(total * workers), nil },
		WatchLatency: func(n int) (time.Duration, time.Duration, error) {
			return time.Duration(n) * 1500 * time.Nanosecond, time.Duration(n) * time.Millisecond, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The same table written cell by cell with tabwriter, as the benchmarks did before.
	var want bytes.Buffer
	tw := tabwriter.NewWriter(&want, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tvalue\tp50\tp99\t")
	fmt.Fprintf(tw, "creates/s sequential\t%.0f\t\t\t\n", 10.0)
	fmt.Fprintf(tw, "creates/s %d concurrent\t%.0f\t\t\t\n", 4, 80.0)
	for _, n := range []int{1, 10, 100} {
		fmt.Fprintf(tw, "watch latency, %d watchers\t\t%v\t%v\t\n", n,
			(time.Duration(n) * 1500 * time.Nanosecond).Round(time.Microsecond), time.Duration(n)*time.Millisecond)
	}
	tw.Flush()
	if buf.String() != want.String() {
		t.Fatalf("table:\n%s\nwant:\n%s", buf.String(), want.String())
	}
}
