// Command etcdload drives an etcd server with concurrent writers for the durable-write
// benchmark (services/skiff-bench/durabench). It is its own module so that etcd's client and
// server stay out of Skiff's go.mod; the benchmark builds it and etcd into a cache dir.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func main() {
	endpoint := flag.String("endpoint", "127.0.0.1:2379", "etcd client URL")
	workers := flag.Int("workers", 1, "concurrent writers")
	duration := flag.Duration("duration", 3*time.Second, "how long to write")
	size := flag.Int("value-size", 512, "bytes per value")
	prefix := flag.String("prefix", "bench", "key prefix (unique per run)")
	create := flag.Bool("create", false, "create-if-absent transactions (as kube-apiserver creates) instead of plain puts")
	flag.Parse()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		fail(err)
	}
	defer cli.Close()
	val := string(make([]byte, *size))
	var next, done atomic.Int64
	var firstErr atomic.Value
	ctx, cancel := context.WithTimeout(context.Background(), *duration+time.Minute)
	defer cancel()
	deadline := time.Now().Add(*duration)
	start := time.Now()
	var wg sync.WaitGroup
	for range *workers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				key := fmt.Sprintf("%s/%d", *prefix, next.Add(1))
				if err := write(ctx, cli, key, val, *create); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		fail(err)
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]float64{"ops": float64(done.Load()), "seconds": time.Since(start).Seconds()})
}

func write(ctx context.Context, cli *clientv3.Client, key, val string, create bool) error {
	if !create {
		_, err := cli.Put(ctx, key, val)
		return err
	}
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(clientv3.OpPut(key, val)).Commit()
	if err == nil && !resp.Succeeded {
		err = fmt.Errorf("create %s: exists", key)
	}
	return err
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "etcdload:", err)
	os.Exit(1)
}
