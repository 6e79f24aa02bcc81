// Package statelogbench measures the state log on a real embedded JetStream
// server with a file store: create throughput and write-to-watch latency.
package statelogbench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
)

const (
	createsSeq     = 3000
	createsConc    = 8
	latencyWrites  = 1000
	valueSize      = 512
	benchTimeLimit = 5 * time.Minute
)

// RunBench prints a table of creates/s and watch latencies.
func RunBench(w io.Writer) error {
	dir, err := os.MkdirTemp("", "skiff-statelogbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	nats, err := benchutil.StartEmbedded(natsserver.Config{DataDir: dir})
	if err != nil {
		return err
	}
	defer nats.Close()
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeLimit)
	defer cancel()
	l, err := statelog.Open(ctx, nats.Conn, statelog.Config{WatchBuffer: 1 << 16})
	if err != nil {
		return err
	}
	defer l.Close()

	return benchutil.WriteVsWatch(w, benchutil.Store{
		Title: "statelog (file store, not synced)", Sequential: createsSeq, Concurrent: createsSeq, Workers: createsConc,
		Creates: func(tag string, workers, total int) (float64, error) {
			return creates(ctx, l, tag, workers, total)
		},
		WatchLatency: func(n int) (time.Duration, time.Duration, error) { return watchLatency(ctx, l, n) },
	})
}

func creates(ctx context.Context, l *statelog.Log, tag string, workers, total int) (float64, error) {
	val := make([]byte, valueSize)
	start := time.Now()
	if err := benchutil.Parallel(workers, total, func(i int) error {
		_, err := l.Create(ctx, fmt.Sprintf("bench/%s/ns/p%d", tag, i), val, nil)
		return err
	}); err != nil {
		return 0, err
	}
	return benchutil.Rate(total, time.Since(start)), nil
}

// watchLatency writes latencyWrites values stamped with their send time and
// measures, in every watcher, the time until the event arrives.
func watchLatency(ctx context.Context, l *statelog.Log, watchers int) (p50, p99 time.Duration, err error) {
	prefix := fmt.Sprintf("bench/lat%d/", watchers)
	lat := make([][]time.Duration, watchers)
	var wg sync.WaitGroup
	for i := range watchers {
		w, err := l.Watch(ctx, prefix, statelog.WatchOptions{})
		if err != nil {
			return 0, 0, err
		}
		defer w.Stop()
		wg.Go(func() {
			for ev := range w.Events() {
				if ev.Type != statelog.EventPut || len(ev.Value) < 8 {
					continue
				}
				sent := time.Unix(0, int64(binary.BigEndian.Uint64(ev.Value)))
				lat[i] = append(lat[i], time.Since(sent))
				if len(lat[i]) == latencyWrites {
					return
				}
			}
		})
	}
	val := make([]byte, valueSize)
	for i := range latencyWrites {
		binary.BigEndian.PutUint64(val, uint64(time.Now().UnixNano()))
		if _, err := l.Create(ctx, fmt.Sprintf("%sns/p%d", prefix, i), slices.Clone(val), nil); err != nil {
			return 0, 0, err
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	var all []time.Duration
	for i, ls := range lat {
		if len(ls) != latencyWrites {
			return 0, 0, fmt.Errorf("watcher %d got %d of %d events", i, len(ls), latencyWrites)
		}
		all = append(all, ls...)
	}
	p50, p99 = benchutil.Percentiles(all)
	return p50, p99, nil
}
