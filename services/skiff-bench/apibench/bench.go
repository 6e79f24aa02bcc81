// Package apibench measures the apiserver through its HTTP API, the way clients meet it:
// creates per second, and write-to-watch-event latency with 1, 10 and 100 HTTP watchers.
package apibench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
)

// Options size the run.
type Options struct {
	Creates       int // total creates per throughput row
	Workers       int // concurrent HTTP clients
	LatencyWrites int // writes observed per latency row
	Tracing       bool
}

func (o *Options) defaults() {
	if o.Creates == 0 {
		o.Creates = 2000
	}
	if o.Workers == 0 {
		o.Workers = 8
	}
	if o.LatencyWrites == 0 {
		o.LatencyWrites = 300
	}
}

// Run starts a control plane (embedded NATS, file store) and prints one table.
func Run(w io.Writer, o Options) error {
	o.defaults()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, stop, err := controlplane.StartScratch(ctx, "skiff-apibench-")
	if err != nil {
		return err
	}
	defer stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	return benchutil.WriteVsWatch(w, benchutil.Store{
		Title: "HTTP API", Sequential: o.Creates / 2, Concurrent: o.Creates, Workers: o.Workers,
		Creates: func(tag string, workers, total int) (float64, error) {
			return creates(ctx, client, cp.URL(), tag, workers, total)
		},
		WatchLatency: func(n int) (time.Duration, time.Duration, error) {
			return watchLatency(ctx, client, cp.URL(), n, o.LatencyWrites)
		},
	})
}

const cmPath = "/api/v1/namespaces/default/configmaps"

func configMap(name string) string {
	return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"},"data":{"k":"` + strings.Repeat("v", 256) + `"}}`
}

func post(ctx context.Context, c *http.Client, base, name string) error {
	return benchutil.Create(ctx, c, base+cmPath, name, configMap(name))
}

func creates(ctx context.Context, c *http.Client, base, tag string, workers, total int) (float64, error) {
	start := time.Now()
	if err := benchutil.Parallel(workers, total, func(i int) error {
		return post(ctx, c, base, fmt.Sprintf("%s-%d", tag, i))
	}); err != nil {
		return 0, err
	}
	return benchutil.Rate(total, time.Since(start)), nil
}

// watchLatency opens n HTTP watches, then writes one object at a time and measures, for every
// watcher, the time from the write's start to the event's arrival.
func watchLatency(ctx context.Context, c *http.Client, base string, n, writes int) (time.Duration, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prefix := fmt.Sprintf("lat%d-", n)
	var mu sync.Mutex
	sent := map[string]time.Time{}
	var lat []time.Duration
	got := make(chan struct{}, n*writes)
	var ready sync.WaitGroup
	for range n {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+cmPath+"?watch=true&resourceVersion=0&allowWatchBookmarks=false", nil)
		resp, err := c.Do(req)
		if err != nil {
			return 0, 0, err
		}
		ready.Add(1)
		go func() {
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			signalled := false
			for sc.Scan() {
				if !signalled {
					signalled = true
					ready.Done()
				}
				var ev struct {
					Type   string `json:"type"`
					Object struct {
						Metadata struct {
							Name string `json:"name"`
						} `json:"metadata"`
					} `json:"object"`
				}
				if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Type != "ADDED" || !strings.HasPrefix(ev.Object.Metadata.Name, prefix) {
					continue
				}
				now := time.Now()
				mu.Lock()
				lat = append(lat, now.Sub(sent[ev.Object.Metadata.Name]))
				mu.Unlock()
				got <- struct{}{}
			}
			if !signalled {
				ready.Done()
			}
		}()
	}
	// Each watch starts with synthetic ADDED events for what exists, so the first line proves
	// the stream is open before the measured writes begin.
	ready.Wait()
	for i := range writes {
		name := fmt.Sprintf("%s%d", prefix, i)
		mu.Lock()
		sent[name] = time.Now()
		mu.Unlock()
		if err := post(ctx, c, base, name); err != nil {
			return 0, 0, err
		}
		for range n {
			select {
			case <-got:
			case <-time.After(10 * time.Second):
				return 0, 0, fmt.Errorf("watch event for %s did not arrive", name)
			}
		}
	}
	p50, p99 := benchutil.Percentiles(lat)
	return p50, p99, nil
}
