package simnode_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/controllers"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/actors/simnode"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

func TestRegistersNodesRenewsLeasesAndRunsPods(t *testing.T) {
	cp := ct.Start(t)
	ctx := ct.Ctx(t)
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("20")}
	ct.Spawn(t, cp, "simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Nodes: 5, Prefix: "kw-", Capacity: capacity,
		Labels: map[string]string{"zone": "a"}, RenewInterval: 50 * time.Millisecond}))
	ct.Wait(t, func() error {
		for i := 0; i < 5; i++ {
			n, err := ct.TryGet[*corev1.Node](cp, "", "nodes", "", simnode.NodeName("kw-", i))
			if err != nil {
				return err
			}
			if !ct.Schedulable(n) || n.Labels["zone"] != "a" || n.Labels[simnode.LabelSimulated] != "true" || !n.Status.Allocatable.Cpu().Equal(resource.MustParse("4")) {
				return ct.Errorf("node %s: %+v", n.Name, n.Status)
			}
		}
		return nil
	})
	lease := func() *coordv1.Lease {
		l, err := ct.TryGet[*coordv1.Lease](cp, "coordination.k8s.io", "leases", simnode.LeaseNamespace, "kw-0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	// The lease is created after the node registers: a node may be seen first.
	ct.Wait(t, func() error {
		_, err := ct.TryGet[*coordv1.Lease](cp, "coordination.k8s.io", "leases", simnode.LeaseNamespace, "kw-0")
		return err
	})
	first := lease()
	if *first.Spec.HolderIdentity != "kw-0" || *first.Spec.LeaseDurationSeconds != 40 {
		t.Fatalf("lease %+v", first.Spec)
	}
	ct.Wait(t, func() error {
		if l := lease(); !l.Spec.RenewTime.After(first.Spec.RenewTime.Time) {
			return ct.Errorf("lease not renewed")
		}
		return nil
	})

	for i := 0; i < 3; i++ {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", i), Namespace: "default"}, Spec: ct.Template("x", "img").Spec}
		p.Spec.NodeName = "kw-1"
		if _, err := cp.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	ct.Wait(t, func() error {
		ips := map[string]bool{}
		for _, p := range ct.ListPods(t, cp, "default", "") {
			if p.Status.Phase != corev1.PodRunning || !controllerkit.IsPodReady(p) || p.Status.PodIP == "" || p.Status.HostIP == "" ||
				len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
				return ct.Errorf("pod %s: %+v", p.Name, p.Status)
			}
			ips[p.Status.PodIP] = true
		}
		if len(ips) != 3 {
			return ct.Errorf("pod IPs not unique: %v", ips)
		}
		return nil
	})
	// A graceful delete is finished by the simulated kubelet.
	if err := cp.Client.Delete(ctx, controllerkit.MustKind("", "pods"), "default", "p0", nil); err != nil {
		t.Fatal(err)
	}
	ct.Wait(t, func() error {
		if _, err := ct.TryGet[*corev1.Pod](cp, "", "pods", "default", "p0"); err == nil {
			return ct.Errorf("p0 still there")
		}
		return nil
	})
}

// TestScale runs a Deployment on many simulated nodes through the whole control plane and
// reports how long it takes. SKIFF_SIM_NODES and SKIFF_SIM_PODS make it larger.
func TestScale(t *testing.T) {
	nodes, pods := envInt("SKIFF_SIM_NODES", 50), envInt("SKIFF_SIM_PODS", 300)
	if testing.Short() {
		t.Skip("scale test")
	}
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) {
		c.Bookmarks = 200 * time.Millisecond
		c.Components = append([]string{"apiserver", "scheduler"}, controllers.Deployment, controllers.ReplicaSet)
	})
	ctx := ct.Ctx(t)
	start := time.Now()
	ct.Spawn(t, cp, "simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Nodes: nodes, Workers: 8}))
	// Counted from the log, not with a List: a list answer over NATS is bounded by its max
	// payload (1 MiB), which a few hundred Nodes exceed.
	nodeInf := informer.For(cp.Log, "", "nodes")
	go func() { _ = nodeInf.Run(ctx) }()
	testutil.Eventually(t, 2*time.Minute, 50*time.Millisecond, func() error {
		ready := nodeInf.List(func(o runtime.Object) bool { return ct.Schedulable(o.(*corev1.Node)) })
		if len(ready) < nodes {
			return ct.Errorf("%d/%d nodes ready", len(ready), nodes)
		}
		return nil
	})
	registered := time.Since(start)
	start = time.Now()
	if _, err := cp.Client.Create(ctx, ct.Deployment("big", "big", int32(pods))); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Minute, 100*time.Millisecond, func() error {
		d := ct.Get[*appsv1.Deployment](t, cp, "apps", "deployments", "default", "big")
		if d.Status.AvailableReplicas != int32(pods) {
			return ct.Errorf("%d/%d available", d.Status.AvailableReplicas, pods)
		}
		return nil
	})
	t.Logf("%d nodes registered and ready in %v; %d pods created, scheduled, running and ready in %v (%.0f pods/s)",
		nodes, registered.Round(time.Millisecond), pods, time.Since(start).Round(time.Millisecond), float64(pods)/time.Since(start).Seconds())
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
