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
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/skiff-sh/skiff/actors/controlplane"
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
	dir, err := os.MkdirTemp("", "skiff-apibench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Config{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	defer cp.Stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "HTTP API\tvalue\tp50\tp99\t")
	rate, err := creates(ctx, client, cp.URL(), "seq", 1, o.Creates/2)
	if err != nil {
		return err
	}
	fmt.Fprintf(tw, "creates/s sequential\t%.0f\t\t\t\n", rate)
	rate, err = creates(ctx, client, cp.URL(), "conc", o.Workers, o.Creates)
	if err != nil {
		return err
	}
	fmt.Fprintf(tw, "creates/s %d concurrent\t%.0f\t\t\t\n", o.Workers, rate)
	for _, n := range []int{1, 10, 100} {
		p50, p99, err := watchLatency(ctx, client, cp.URL(), n, o.LatencyWrites)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "watch latency, %d watchers\t\t%v\t%v\t\n", n, p50.Round(time.Microsecond), p99.Round(time.Microsecond))
	}
	return tw.Flush()
}

const cmPath = "/api/v1/namespaces/default/configmaps"

func configMap(name string) string {
	return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"},"data":{"k":"` + strings.Repeat("v", 256) + `"}}`
}

func post(ctx context.Context, c *http.Client, base, name string) error {
	req, _ := http.NewRequestWithContext(ctx, "POST", base+cmPath, strings.NewReader(configMap(name)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("create %s: HTTP %d", name, resp.StatusCode)
	}
	return nil
}

func creates(ctx context.Context, c *http.Client, base, tag string, workers, total int) (float64, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(total) {
					return
				}
				if err := post(ctx, c, base, fmt.Sprintf("%s-%d", tag, i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	return float64(total) / time.Since(start).Seconds(), nil
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
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100], nil
}
