// Package schedbench measures the scheduler end to end: pods created through the HTTP API, bound
// by the scheduler actor through the binding subresource, observed as binds in the state log.
package schedbench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/logvalue"
	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cp, stop, err := controlplane.StartScratch(ctx, "skiff-schedbench-")
	if err != nil {
		return err
	}
	defer stop()
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
			node, err1 := logvalue.PodNodeName(ev.Value)
			prevNode, err2 := logvalue.PodNodeName(ev.PrevValue)
			if err1 != nil || err2 != nil || node == "" || prevNode != "" {
				continue
			}
			now := time.Now()
			name := ev.Key[strings.LastIndexByte(ev.Key, '/')+1:]
			mu.Lock()
			start, ok := created[name]
			mu.Unlock()
			if ok {
				bound <- now.Sub(start)
			}
		}
	}()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	start := time.Now()
	err = benchutil.Parallel(o.Workers, o.Pods, func(i int) error {
		name := fmt.Sprintf("bench-%d", i)
		mu.Lock()
		created[name] = time.Now()
		mu.Unlock()
		return createPod(ctx, client, cp.URL(), name)
	})
	createdIn := time.Since(start)
	if err != nil {
		return err
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
	p50, p99 := benchutil.Percentiles(lat)
	t := benchutil.NewTable(w, "scheduler end to end", "nodes", "pods", "creates/s", "bound/s", "create→bound p50", "p99")
	t.Row("HTTP create → bind in log", o.Nodes, o.Pods, benchutil.Rate(o.Pods, createdIn), benchutil.Rate(o.Pods, total),
		p50.Round(time.Millisecond), p99.Round(time.Millisecond))
	return t.Flush()
}

func registerNodes(ctx context.Context, cp *controlplane.ControlPlane, n, workers int) error {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
	return benchutil.Parallel(workers, n, func(i int) error {
		name := fmt.Sprintf("sim-%05d", i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": fmt.Sprintf("z%d", i%5)}}}
		out, err := cp.Client.Create(ctx, node)
		if err != nil {
			return err
		}
		node = out.(*corev1.Node)
		node.Status = corev1.NodeStatus{Capacity: alloc, Allocatable: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
		_, err = cp.Client.UpdateStatus(ctx, node)
		return err
	})
}

func createPod(ctx context.Context, c *http.Client, base, name string) error {
	body := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `","labels":{"app":"bench"}},"spec":{"containers":[{"name":"c","image":"skiff.local/httpecho:v1","resources":{"requests":{"cpu":"100m","memory":"128Mi"}}}]}}`
	return benchutil.Create(ctx, c, base+"/api/v1/namespaces/default/pods", name, body)
}
