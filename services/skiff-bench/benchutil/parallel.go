// Package benchutil holds what Skiff's benchmark programs share: a worker pool over numbered
// operations, percentiles, and the tables they print.
package benchutil

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Parallel runs op(1) … op(total) on workers goroutines. A worker stops at its first error;
// Parallel returns one of those errors once every worker is done.
func Parallel(workers, total int, op func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(total) {
					return
				}
				if err := op(int(i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// Rate is n operations per second of d.
func Rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// Percentiles sorts lat in place and returns its median and 99th percentile; lat must not be
// empty.
func Percentiles(lat []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100]
}
