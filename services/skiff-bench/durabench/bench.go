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
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
)

const (
	runFor    = 3 * time.Second
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
		tag := fmt.Sprintf("w%d", n)
		skiff, err := timedCreates(ctx, l, tag, n)
		if err != nil {
			return err
		}
		puts, err := etcdRate(ctx, bins, endpoint, "put/"+tag, n, false)
		if err != nil {
			return err
		}
		creates, err := etcdRate(ctx, bins, endpoint, "create/"+tag, n, true)
		if err != nil {
			return err
		}
		t.Row(fmt.Sprintf("%d writers", n), skiff, puts, creates,
			fmt.Sprintf("%.2fx", skiff/puts), fmt.Sprintf("%.2fx", skiff/creates))
	}
	return t.Flush()
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
