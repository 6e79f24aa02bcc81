package nodelifecycle_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/nodelifecycle"
	"github.com/skiff-sh/skiff/actors/simnode"
)

func ready(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func hasUnreachableTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeUnreachable && t.Effect == corev1.TaintEffectNoExecute && t.TimeAdded != nil {
			return true
		}
	}
	return false
}

func TestSilentNodeIsTaintedAndItsPodsEvicted(t *testing.T) {
	cp := ct.Start(t)
	ctx := ct.Ctx(t)
	sim := ct.Spawn(t, cp, "simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Nodes: 2, RenewInterval: 100 * time.Millisecond}))
	ct.Spawn(t, cp, "nodelifecycle", nodelifecycle.New(nodelifecycle.Config{Informers: cp.Informers, Client: cp.Client,
		GracePeriod: time.Second, PodEvictionTimeout: 1500 * time.Millisecond, MonitorPeriod: 200 * time.Millisecond}))
	node := simnode.NodeName("sim-", 0)
	ct.Wait(t, func() error {
		n, err := ct.TryGet[*corev1.Node](cp, "", "nodes", "", node)
		if err != nil {
			return err
		}
		if ready(n) != corev1.ConditionTrue {
			return ct.Errorf("node not ready yet")
		}
		return nil
	})
	mk := func(name string, tol []corev1.Toleration) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: ct.Template("x", "img").Spec}
		p.Spec.NodeName = node
		p.Spec.Tolerations = tol
		if _, err := cp.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	mk("default-toleration", nil)
	mk("tolerates-long", []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(3600))}})
	mk("tolerates-forever", []corev1.Toleration{{Operator: corev1.TolerationOpExists}})
	ct.Wait(t, func() error {
		if n := ct.CountReady(ct.ListPods(t, cp, "default", "")); n != 3 {
			return ct.Errorf("%d pods ready", n)
		}
		return nil
	})

	frozenAt := time.Now()
	cp.Actors.Send(sim, &simnode.Freeze{Node: node})
	ct.Wait(t, func() error {
		n := ct.Get[*corev1.Node](t, cp, "", "nodes", "", node)
		if ready(n) != corev1.ConditionUnknown || !hasUnreachableTaint(n) {
			return ct.Errorf("node %s: ready=%s taints=%v", node, ready(n), n.Spec.Taints)
		}
		return nil
	})
	// The grace period runs from the last renewal seen, at most one renew interval before the freeze.
	if d := time.Since(frozenAt); d < 900*time.Millisecond {
		t.Fatalf("NotReady after %v, before the 1 s grace period", d)
	}
	ct.Wait(t, func() error {
		for _, p := range ct.ListPods(t, cp, "default", "") {
			if controllerkit.IsPodReady(p) {
				return ct.Errorf("pod %s still Ready on a silent node", p.Name)
			}
		}
		p := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", "default-toleration")
		if p.DeletionTimestamp == nil {
			return ct.Errorf("pod without toleration not evicted")
		}
		return nil
	})
	for _, name := range []string{"tolerates-long", "tolerates-forever"} {
		if p := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", name); p.DeletionTimestamp != nil {
			t.Fatalf("pod %s was evicted despite its toleration", name)
		}
	}
	// The other node kept renewing and is untouched.
	if n := ct.Get[*corev1.Node](t, cp, "", "nodes", "", simnode.NodeName("sim-", 1)); ready(n) != corev1.ConditionTrue || hasUnreachableTaint(n) {
		t.Fatalf("healthy node affected: %+v", n.Spec.Taints)
	}

	// Back to life: Ready again, taint gone, pods Ready.
	cp.Actors.Send(sim, &simnode.Thaw{Node: node})
	ct.Wait(t, func() error {
		n := ct.Get[*corev1.Node](t, cp, "", "nodes", "", node)
		if ready(n) != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
			return ct.Errorf("node %s: ready=%s taints=%v", node, ready(n), n.Spec.Taints)
		}
		for _, name := range []string{"tolerates-long", "tolerates-forever"} {
			if !controllerkit.IsPodReady(ct.Get[*corev1.Pod](t, cp, "", "pods", "default", name)) {
				return ct.Errorf("%s not ready again", name)
			}
		}
		return nil
	})
}

// reconciles is how many reconciles the node controller has finished, in any control plane of
// this test binary.
func reconciles(t *testing.T) uint64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != "skiff_controller_reconcile_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == nodelifecycle.Name {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}

// TestResyncLeavesHealthyNodesAlone: renewals and the periodic resync of nodes in good
// standing reconcile nothing; each node is looked at again only at its grace deadline.
func TestResyncLeavesHealthyNodesAlone(t *testing.T) {
	const nodes, monitor, window = 20, 50 * time.Millisecond, 2 * time.Second
	cp := ct.Start(t)
	ct.Spawn(t, cp, "simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Nodes: nodes, RenewInterval: 100 * time.Millisecond}))
	ct.Spawn(t, cp, "nodelifecycle", nodelifecycle.New(nodelifecycle.Config{Informers: cp.Informers, Client: cp.Client,
		GracePeriod: 4 * time.Second, MonitorPeriod: monitor}))
	ct.Wait(t, func() error {
		for i := range nodes {
			n, err := ct.TryGet[*corev1.Node](cp, "", "nodes", "", simnode.NodeName("sim-", i))
			if err != nil {
				return err
			}
			if ready(n) != corev1.ConditionTrue {
				return ct.Errorf("node %s not ready yet", n.Name)
			}
		}
		return nil
	})
	before := reconciles(t)
	time.Sleep(window)
	// Every resync reconciling every node would be nodes*window/monitor = 800.
	if got := reconciles(t) - before; got > nodes*uint64(window/monitor)/8 {
		t.Fatalf("%d reconciles of %d healthy nodes in %v", got, nodes, window)
	}
	for i := range nodes {
		if n := ct.Get[*corev1.Node](t, cp, "", "nodes", "", simnode.NodeName("sim-", i)); ready(n) != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
			t.Fatalf("node %s: ready=%s taints=%v", n.Name, ready(n), n.Spec.Taints)
		}
	}
}
