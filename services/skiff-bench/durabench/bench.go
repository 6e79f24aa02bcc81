// Package durabench compares durable writes: the state log on an embedded JetStream server,
// each write fsynced before it returns (group commit, as skiff up runs it), against etcd
// v3.6.8 (which fsyncs every commit), both on this machine and the same disk, at 1 to 256
// concurrent writers.
package durabench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
)

const (
	runFor    = 2 * time.Second
	trials    = 3
	valueSize = 512
)

var writerCounts = []int{1, 8, 64, 256}

// Run prints, per writer count, the state log's durable creates/s beside etcd's puts/s and
// create transactions/s (kube-apiserver's create).
func Run(w io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bins, err := buildEtcd(ctx)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "skiff-durabench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	endpoint, stopEtcd, err := startEtcd(ctx, bins.server, filepath.Join(dir, "etcd"))
	if err != nil {
		return err
	}
	defer stopEtcd()
	// Over TCP, as etcd's client talks to it.
	nats, err := benchutil.StartEmbedded(natsserver.Config{DataDir: filepath.Join(dir, "nats"), Port: -1})
	if err != nil {
		return err
	}
	defer nats.Close()
	// As skiff up runs it: the server syncs nothing itself, every write waits for a group
	// fsync of the stream.
	l, err := statelog.Open(ctx, nats.Conn, statelog.Config{Sync: nats.Server.StreamSync(statelog.DefaultStream)})
	if err != nil {
		return err
	}
	defer l.Close()

	t := benchutil.NewTable(w, "durable writes/s", "statelog creates", "etcd puts", "etcd creates", "vs puts", "vs creates")
	for _, n := range writerCounts {
		var skiff, puts, creates []float64
		// Alternating runs, so that load from elsewhere on the machine falls on both.
		for trial := range trials {
			tag := fmt.Sprintf("w%d-%d", n, trial)
			r, err := timedCreates(ctx, l, tag, n)
			if err != nil {
				return err
			}
			skiff = append(skiff, r)
			if r, err = etcdRate(ctx, bins, endpoint, "put/"+tag, n, false); err != nil {
				return err
			}
			puts = append(puts, r)
			if r, err = etcdRate(ctx, bins, endpoint, "create/"+tag, n, true); err != nil {
				return err
			}
			creates = append(creates, r)
		}
		s, p, c := median(skiff), median(puts), median(creates)
		t.Row(fmt.Sprintf("%d writers", n), s, p, c, fmt.Sprintf("%.2fx", s/p), fmt.Sprintf("%.2fx", s/c))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "(each the median of %d alternating runs of %v; %d-byte values; etcd: a put, and a create-if-absent transaction as kube-apiserver's create)\n", trials, runFor, valueSize)
	return err
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// timedCreates runs workers writers creating new keys for runFor and returns creates/s.
func timedCreates(ctx context.Context, l *statelog.Log, tag string, workers int) (float64, error) {
	val := make([]byte, valueSize)
	var next, done atomic.Int64
	var mu sync.Mutex
	var firstErr error
	deadline := time.Now().Add(runFor)
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				key := fmt.Sprintf("bench/%s/ns/k%d", tag, next.Add(1))
				if _, err := l.Create(ctx, key, val, nil); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return benchutil.Rate(int(done.Load()), time.Since(start)), nil
}
