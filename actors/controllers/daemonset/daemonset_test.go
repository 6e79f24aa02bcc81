package daemonset_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/daemonset"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/simnode"
)

func daemonPods(t *testing.T, cp *controlplane.ControlPlane) map[string][]*corev1.Pod {
	byNode := map[string][]*corev1.Pod{}
	for _, p := range ct.Active(ct.ListPods(t, cp, "default", "app=agent")) {
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	return byNode
}

func editNode(t *testing.T, cp *controlplane.ControlPlane, name string, edit func(n *corev1.Node)) {
	ct.Wait(t, func() error {
		n, err := ct.TryGet[*corev1.Node](cp, "", "nodes", "", name)
		if err != nil {
			return err
		}
		edit(n)
		_, err = cp.Client.Update(context.Background(), n)
		return err
	})
}

func TestOnePodPerEligibleNodeAndRollingUpdate(t *testing.T) {
	cp := ct.Start(t)
	ctx := ct.Ctx(t)
	ct.Spawn(t, cp, "simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Nodes: 4}))
	ct.Wait(t, func() error {
		for i := 0; i < 4; i++ {
			if _, err := ct.TryGet[*corev1.Node](cp, "", "nodes", "", simnode.NodeName("sim-", i)); err != nil {
				return err
			}
		}
		return nil
	})
	// sim-0 is excluded by the nodeSelector, sim-1 by a taint; sim-2 is cordoned but still runs daemons.
	editNode(t, cp, "sim-0", func(n *corev1.Node) { n.Labels["role"] = "edge" })
	editNode(t, cp, "sim-1", func(n *corev1.Node) {
		n.Labels["role"] = "worker"
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	})
	editNode(t, cp, "sim-2", func(n *corev1.Node) { n.Labels["role"] = "worker"; n.Spec.Unschedulable = true })
	editNode(t, cp, "sim-3", func(n *corev1.Node) { n.Labels["role"] = "worker" })
	ct.Spawn(t, cp, "daemonset", daemonset.New(daemonset.Config{Informers: cp.Informers, Client: cp.Client}))

	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
		Template: ct.Template("agent", "agent:1"),
		UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt(1))}},
	}}
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"role": "worker"}
	if _, err := cp.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	wait := func(image string) {
		ct.Wait(t, func() error {
			byNode := daemonPods(t, cp)
			if len(byNode) != 2 || len(byNode["sim-2"]) != 1 || len(byNode["sim-3"]) != 1 {
				return ct.Errorf("pods by node: %v", byNode)
			}
			for n, ps := range byNode {
				if ps[0].Spec.Containers[0].Image != image {
					return ct.Errorf("%s runs %s", n, ps[0].Spec.Containers[0].Image)
				}
			}
			d := ct.Get[*appsv1.DaemonSet](t, cp, "apps", "daemonsets", "default", "agent")
			s := d.Status
			if s.ObservedGeneration != d.Generation || s.DesiredNumberScheduled != 2 || s.CurrentNumberScheduled != 2 || s.NumberReady != 2 ||
				s.UpdatedNumberScheduled != 2 || s.NumberAvailable != 2 || s.NumberMisscheduled != 0 {
				return ct.Errorf("status %+v", s)
			}
			return nil
		})
	}
	wait("agent:1")

	// Rolling update with maxUnavailable 1: never fewer than 1 of the 2 daemons ready.
	iv := ct.WatchInvariant(t, cp, "", "pods", func(objs []runtime.Object) error {
		var pods []*corev1.Pod
		for _, o := range objs {
			if p := o.(*corev1.Pod); p.Labels["app"] == "agent" {
				pods = append(pods, p)
			}
		}
		if n := ct.CountReady(pods); n < 1 {
			return ct.Errorf("%d daemons ready", n)
		}
		return nil
	})
	iv.Start()
	ct.Wait(t, func() error {
		d := ct.Get[*appsv1.DaemonSet](t, cp, "apps", "daemonsets", "default", "agent")
		d.Spec.Template.Spec.Containers[0].Image = "agent:2"
		_, err := cp.Client.Update(ctx, d)
		return err
	})
	wait("agent:2")
	if v, n := iv.Stop(); len(v) > 0 || n == 0 {
		t.Fatalf("rolling update broke maxUnavailable (%d changes): %v", n, v)
	}

	// A node that stops qualifying loses its daemon.
	editNode(t, cp, "sim-3", func(n *corev1.Node) { n.Labels["role"] = "edge" })
	ct.Wait(t, func() error {
		if byNode := daemonPods(t, cp); len(byNode) != 1 || len(byNode["sim-2"]) != 1 {
			return ct.Errorf("pods by node: %v", byNode)
		}
		return nil
	})
}
