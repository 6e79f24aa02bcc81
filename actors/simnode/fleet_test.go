package simnode_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/actors/simnode"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// TestLeasesStayFreshAtScale: many nodes renewing on a short interval through the shared
// informers; no lease may ever be older than its duration, and bound pods still run.
// SKIFF_SIM_LEASE_NODES and SKIFF_SIM_RENEW_MS change the load.
func TestLeasesStayFreshAtScale(t *testing.T) {
	nodes := envInt("SKIFF_SIM_LEASE_NODES", defaultNodes)
	interval := time.Duration(envInt("SKIFF_SIM_RENEW_MS", defaultRenewMS)) * time.Millisecond
	const duration = defaultDuration
	cp := ct.Start(t)
	ctx := ct.Ctx(t)
	leases := informer.Shared[*coordv1.Lease](cp.Informers, "coordination.k8s.io", "leases")
	nodeCache := informer.Shared[*corev1.Node](cp.Informers, "", "nodes")
	start := time.Now()
	ct.Spawn(t, cp, "simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Informers: cp.Informers,
		Nodes: nodes, Prefix: "lz-", LeaseDuration: duration, RenewInterval: interval}))
	testutil.Eventually(t, time.Minute, 50*time.Millisecond, func() error {
		ready := 0
		for i := 0; i < nodes; i++ {
			if n, ok := nodeCache.Get("", simnode.NodeName("lz-", i)); ok && ct.Schedulable(n) {
				ready++
			}
		}
		if ready < nodes || len(leases.InNamespace(simnode.LeaseNamespace)) < nodes {
			return ct.Errorf("%d/%d nodes ready, %d leases", ready, nodes, len(leases.InNamespace(simnode.LeaseNamespace)))
		}
		return nil
	})
	t.Logf("%d nodes registered and ready in %v", nodes, time.Since(start).Round(time.Millisecond))

	var renewals atomic.Int64
	remove := leases.AddHandler(informer.TypedFuncs[*coordv1.Lease]{Update: func(_, _ *coordv1.Lease) { renewals.Add(1) }})
	window := time.Now()
	var oldest time.Duration
	for time.Since(window) < 3*time.Second {
		for _, l := range leases.InNamespace(simnode.LeaseNamespace) {
			if *l.Spec.LeaseDurationSeconds != int32(duration/time.Second) {
				t.Fatalf("lease %s: duration %ds", l.Name, *l.Spec.LeaseDurationSeconds)
			}
			age := time.Since(l.Spec.RenewTime.Time)
			oldest = max(oldest, age)
			if age >= duration {
				t.Fatalf("lease %s is %v old (lease duration %v)", l.Name, age, duration)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	remove()
	elapsed := time.Since(window)
	t.Logf("%d renewals in %v: %.0f/s (schedule %.0f/s); oldest lease seen %v", renewals.Load(), elapsed.Round(time.Millisecond),
		float64(renewals.Load())/elapsed.Seconds(), float64(nodes)/interval.Seconds(), oldest.Round(time.Millisecond))

	const pods = 20
	for i := 0; i < pods; i++ {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("lz", i), Namespace: "default"}, Spec: ct.Template("x", "img").Spec}
		p.Spec.NodeName = simnode.NodeName("lz-", i*nodes/pods)
		if _, err := cp.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	ct.Wait(t, func() error {
		for i := 0; i < pods; i++ {
			p, err := ct.TryGet[*corev1.Pod](cp, "", "pods", "default", fmt.Sprint("lz", i))
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodRunning || !controllerkit.IsPodReady(p) {
				return ct.Errorf("pod %s on %s: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
			}
		}
		return nil
	})
}
