// Package kubeletbench measures pod startup latency on one real node: the time from a pod's
// create call to the kubelet reporting it Ready, through the apiserver, the scheduler, the
// kubelet and containerd (image already imported).
package kubeletbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/actors/kubelet"
	"github.com/skiff-sh/skiff/actors/kubelet/kubelettest"
)

// Pods is how many pods one run starts.
const Pods = 20

// RunBench starts a control plane and one node, creates Pods httpecho pods at once and
// writes the apply -> Ready latency percentiles to w.
func RunBench(w io.Writer) error {
	if r := kubelettest.SkipReason(); r != "" {
		return fmt.Errorf("kubelet bench: %s", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	setup := time.Now()
	node, err := kubelettest.StartNode(ctx)
	if err != nil {
		return err
	}
	defer node.Close()
	dir, err := os.MkdirTemp("", "skiff-kubeletbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cp, err := controlplane.Start(ctx, controlplane.Config{DataDir: dir, Components: []string{"apiserver", "scheduler"},
		Bookmarks: 200 * time.Millisecond, Logger: quiet})
	if err != nil {
		return err
	}
	defer cp.Stop()
	const nodeName = "bench-node"
	pid, err := cp.Actors.Spawn("kubelet", kubelet.New(kubelet.Config{Log: cp.Log, Informers: cp.Informers, Client: cp.Client, NodeName: nodeName,
		Runtime: node.Runtime, PodCIDR: node.Options.PodCIDR, Workers: 8, Logger: quiet}))
	if err != nil {
		return err
	}
	// Stopped before the node is torn down: a live agent would start the pods again.
	defer cp.Actors.Stop(pid)

	var mu sync.Mutex
	created, ready := map[string]time.Time{}, map[string]time.Time{}
	done := make(chan struct{})
	inf := informer.For(cp.Log, "", "pods")
	note := func(o runtime.Object) {
		p := o.(*corev1.Pod)
		if !controllerkit.IsPodReady(p) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, ok := ready[p.Name]; !ok {
			ready[p.Name] = time.Now()
			if len(ready) == Pods {
				close(done)
			}
		}
	}
	inf.AddHandler(informer.Funcs{Add: note, Update: func(_, o runtime.Object) { note(o) }})
	go func() { _ = inf.Run(ctx) }()
	if err := waitNodeReady(ctx, cp, nodeName); err != nil {
		return err
	}
	fmt.Fprintf(w, "kubelet bench: node up in %v (containerd start, image build+import, control plane)\n", time.Since(setup).Round(time.Millisecond))

	start := time.Now()
	for i := range Pods {
		p := benchPod(fmt.Sprintf("bench-%02d", i))
		mu.Lock()
		created[p.Name] = time.Now()
		mu.Unlock()
		if _, err := cp.Client.Create(ctx, p); err != nil {
			return err
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("kubelet bench: %d/%d pods ready before the deadline", len(ready), Pods)
	}
	total := time.Since(start)
	mu.Lock()
	var lat []time.Duration
	for name, t := range ready {
		lat = append(lat, t.Sub(created[name]))
	}
	mu.Unlock()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Fprintf(w, "kubelet bench: %d pods on one node, create -> Ready: p50 %v  p99 %v  max %v  (all ready %v after the first create, %.1f pods/s)\n",
		Pods, pct(lat, 50), pct(lat, 99), lat[len(lat)-1].Round(time.Millisecond), total.Round(time.Millisecond), float64(Pods)/total.Seconds())
	return nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[max(min(i, len(sorted))-1, 0)].Round(time.Millisecond)
}

func waitNodeReady(ctx context.Context, cp *controlplane.ControlPlane, name string) error {
	for {
		if o, err := cp.Client.Get(ctx, controllerkit.MustKind("", "nodes"), "", name); err == nil {
			for _, c := range o.(*corev1.Node).Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubelet bench: node %s not ready: %w", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func benchPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
			Containers: []corev1.Container{{Name: "web", Image: kubelettest.Image,
				// No probes, as in the Kubernetes pod-startup SLI: Ready = every container running.
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			}},
		},
	}
}
