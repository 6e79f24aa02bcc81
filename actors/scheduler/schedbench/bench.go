// Package schedbench measures the scheduler end to end: pods created through the HTTP API, bound
// by the scheduler actor through the binding subresource, observed as binds in the state log.
package schedbench

import (
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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// Options size the run.
type Options struct {
	Nodes, Pods, Workers int
}

// Run prints one table row: bind throughput and create->bound latency.
func Run(w io.Writer, o Options) error {
	if o.Nodes == 0 {
		o.Nodes = 5000
	}
	if o.Pods == 0 {
		o.Pods = 10000
	}
	if o.Workers == 0 {
		o.Workers = 16
	}
	dir, err := os.MkdirTemp("", "skiff-schedbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Config{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	defer cp.Stop()
	if err := registerNodes(ctx, cp, o.Nodes, o.Workers); err != nil {
		return err
	}
	podsKind, _ := schemas.ByResource("", "v1", "pods")
	watch, err := cp.Log.Watch(ctx, schemas.StoragePrefix(podsKind, "default"), statelog.WatchOptions{FromRev: cp.Log.Rev()})
	if err != nil {
		return err
	}
	defer watch.Stop()

	var mu sync.Mutex
	created := make(map[string]time.Time, o.Pods)
	bound := make(chan time.Duration, o.Pods)
	go func() {
		for ev := range watch.Events() {
			if ev.Type != statelog.EventPut || ev.PrevRev == 0 {
				continue
			}
			var p struct {
				Metadata struct{ Name string }     `json:"metadata"`
				Spec     struct{ NodeName string } `json:"spec"`
			}
			var prev struct {
				Spec struct{ NodeName string } `json:"spec"`
			}
			if json.Unmarshal(ev.Value, &p) != nil || json.Unmarshal(ev.PrevValue, &prev) != nil || p.Spec.NodeName == "" || prev.Spec.NodeName != "" {
				continue
			}
			now := time.Now()
			mu.Lock()
			start, ok := created[p.Metadata.Name]
			mu.Unlock()
			if ok {
				bound <- now.Sub(start)
			}
		}
	}()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, o.Workers)
	for range o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(o.Pods) {
					return
				}
				name := fmt.Sprintf("bench-%d", i)
				mu.Lock()
				created[name] = time.Now()
				mu.Unlock()
				if err := createPod(ctx, client, cp.URL(), name); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	createdIn := time.Since(start)
	select {
	case err := <-errs:
		return err
	default:
	}
	lat := make([]time.Duration, 0, o.Pods)
	for len(lat) < o.Pods {
		select {
		case d := <-bound:
			lat = append(lat, d)
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d pods bound", len(lat), o.Pods)
		}
	}
	total := time.Since(start)
	slices.Sort(lat)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scheduler end to end\tnodes\tpods\tcreates/s\tbound/s\tcreate→bound p50\tp99\t")
	fmt.Fprintf(tw, "HTTP create → bind in log\t%d\t%d\t%.0f\t%.0f\t%v\t%v\t\n", o.Nodes, o.Pods,
		float64(o.Pods)/createdIn.Seconds(), float64(o.Pods)/total.Seconds(),
		lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond))
	return tw.Flush()
}

func registerNodes(ctx context.Context, cp *controlplane.ControlPlane, n, workers int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				name := fmt.Sprintf("sim-%05d", i)
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": fmt.Sprintf("z%d", i%5)}}}
				out, err := cp.Client.Create(ctx, node)
				if err != nil {
					errs <- err
					return
				}
				node = out.(*corev1.Node)
				node.Status = corev1.NodeStatus{Capacity: alloc, Allocatable: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
				if _, err := cp.Client.UpdateStatus(ctx, node); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func createPod(ctx context.Context, c *http.Client, base, name string) error {
	body := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `","labels":{"app":"bench"}},"spec":{"containers":[{"name":"c","image":"skiff.local/httpecho:v1","resources":{"requests":{"cpu":"100m","memory":"128Mi"}}}]}}`
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/api/v1/namespaces/default/pods", strings.NewReader(body))
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
