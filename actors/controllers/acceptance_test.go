package controllers_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/deployment"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/simnode"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// The whole control plane as `skiff up` runs it (apiserver, scheduler, every controller) on
// three simulated nodes, with short node timings.
func TestDeploymentLifecycleOnSimulatedNodes(t *testing.T) {
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) {
		c.Bookmarks = 200 * time.Millisecond
		c.Controllers = controllers.Options{NodeGracePeriod: time.Second, PodEvictionTimeout: time.Second, NodeMonitorPeriod: 200 * time.Millisecond}
	})
	for _, name := range controllers.All {
		if cp.Actor(name) == nil {
			t.Fatalf("controller %s not running", name)
		}
	}
	ctx := ct.Ctx(t)
	sim := ct.Spawn(t, cp, "simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Nodes: 3, RenewInterval: 100 * time.Millisecond}))

	d := ct.Deployment("web", "web", 3)
	d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt(1)), MaxUnavailable: ptr.To(intstr.FromInt(0))}
	if _, err := cp.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	running := func(image string, avoid string) []*corev1.Pod {
		var pods []*corev1.Pod
		ct.Wait(t, func() error {
			pods = ct.Active(ct.ListPods(t, cp, "default", "app=web"))
			if len(pods) != 3 || ct.CountReady(pods) != 3 {
				return ct.Errorf("%d pods, %d ready", len(pods), ct.CountReady(pods))
			}
			for _, p := range pods {
				if p.Status.Phase != corev1.PodRunning || p.Spec.Containers[0].Image != image || p.Spec.NodeName == avoid {
					return ct.Errorf("pod %s: %s %s on %s", p.Name, p.Status.Phase, p.Spec.Containers[0].Image, p.Spec.NodeName)
				}
			}
			dep := ct.Get[*appsv1.Deployment](t, cp, "apps", "deployments", "default", "web")
			if dep.Status.ObservedGeneration < dep.Generation || dep.Status.UpdatedReplicas != 3 || dep.Status.AvailableReplicas != 3 || dep.Status.Replicas != 3 {
				return ct.Errorf("deployment status %+v", dep.Status)
			}
			return nil
		})
		return pods
	}
	pods := running("img:1", "")

	// A deleted pod is replaced.
	if err := cp.Client.Delete(ctx, controllerkit.MustKind("", "pods"), "default", pods[0].Name, nil); err != nil {
		t.Fatal(err)
	}
	ct.Wait(t, func() error {
		if _, err := ct.TryGet[*corev1.Pod](cp, "", "pods", "default", pods[0].Name); err == nil {
			return ct.Errorf("deleted pod still there")
		}
		return nil
	})
	running("img:1", "")

	// A new image rolls out within maxSurge 1 / maxUnavailable 0, checked on every pod change.
	iv := ct.WatchInvariant(t, cp, "", "pods", func(objs []runtime.Object) error {
		var web []*corev1.Pod
		for _, o := range objs {
			if p := o.(*corev1.Pod); p.Labels["app"] == "web" {
				web = append(web, p)
			}
		}
		if n := len(ct.Active(web)); n > 4 {
			return ct.Errorf("%d pods > 3+1", n)
		}
		if n := ct.CountReady(web); n < 3 {
			return ct.Errorf("%d ready < 3-0", n)
		}
		return nil
	})
	setTemplate := func(edit func(*corev1.PodTemplateSpec)) {
		ct.Wait(t, func() error {
			dep := ct.Get[*appsv1.Deployment](t, cp, "apps", "deployments", "default", "web")
			edit(&dep.Spec.Template)
			_, err := cp.Client.Update(ctx, dep)
			return err
		})
	}
	dep := ct.Get[*appsv1.Deployment](t, cp, "apps", "deployments", "default", "web")
	var first *appsv1.ReplicaSet
	for _, o := range listRS(t, cp) {
		if controllerkit.IsOwnedBy(o, dep) {
			first = o
		}
	}
	iv.Start()
	setTemplate(func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Image = "img:2" })
	running("img:2", "")
	if v, n := iv.Stop(); len(v) > 0 || n == 0 {
		t.Fatalf("rolling update out of bounds (%d changes): %v", n, v)
	}

	// Rollback: the old template comes back, and with it the old ReplicaSet.
	iv.Start()
	setTemplate(func(p *corev1.PodTemplateSpec) {
		tmpl := first.Spec.Template.DeepCopy()
		delete(tmpl.Labels, deployment.HashLabel)
		*p = *tmpl
	})
	pods = running("img:1", "")
	if v, _ := iv.Stop(); len(v) > 0 {
		t.Fatalf("rollback out of bounds: %v", v)
	}
	for _, p := range pods {
		if p.Labels[deployment.HashLabel] != first.Labels[deployment.HashLabel] {
			t.Fatalf("pod %s not from the first ReplicaSet after rollback", p.Name)
		}
	}

	// A node whose lease stops: NotReady, tainted, its pods evicted and replaced elsewhere.
	victim := pods[0].Spec.NodeName
	cp.Actors.Send(sim, &simnode.Freeze{Node: victim})
	ct.Wait(t, func() error {
		n := ct.Get[*corev1.Node](t, cp, "", "nodes", "", victim)
		if readyOf(n) != corev1.ConditionUnknown {
			return ct.Errorf("node %s still %s", victim, readyOf(n))
		}
		for _, tn := range n.Spec.Taints {
			if tn.Key == corev1.TaintNodeUnreachable && tn.Effect == corev1.TaintEffectNoExecute {
				return nil
			}
		}
		return ct.Errorf("no unreachable taint on %s: %v", victim, n.Spec.Taints)
	})
	running("img:1", victim)
	for _, reason := range []string{"ScalingReplicaSet", "SuccessfulCreate", "SuccessfulDelete", "TaintManagerEviction", "NodeNotReady"} {
		waitEvent(t, cp, reason)
	}

	// Deleting the Deployment (background propagation) takes its ReplicaSets and pods along.
	cp.Actors.Send(sim, &simnode.Thaw{Node: victim}) // its terminating pods can finish now
	if err := cp.Client.Delete(ctx, controllerkit.MustKind("apps", "deployments"), "default", "web", nil); err != nil {
		t.Fatal(err)
	}
	ct.Wait(t, func() error {
		if rs := listRS(t, cp); len(rs) != 0 {
			return ct.Errorf("%d ReplicaSets left", len(rs))
		}
		if pods := ct.ListPods(t, cp, "default", "app=web"); len(pods) != 0 {
			return ct.Errorf("%d pods left", len(pods))
		}
		return nil
	})
}

func waitEvent(t *testing.T, cp *controlplane.ControlPlane, reason string) {
	t.Helper()
	ct.Wait(t, func() error {
		objs, _, err := cp.Client.List(context.Background(), controllerkit.MustKind("", "events"), "", nil)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if e := o.(*corev1.Event); e.Reason == reason && e.Count >= 1 && e.InvolvedObject.Name != "" {
				return nil
			}
		}
		return ct.Errorf("no %s event", reason)
	})
}

func readyOf(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func listRS(t *testing.T, cp *controlplane.ControlPlane) []*appsv1.ReplicaSet {
	objs, _, err := cp.Client.List(context.Background(), controllerkit.MustKind("apps", "replicasets"), "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []*appsv1.ReplicaSet
	for _, o := range objs {
		out = append(out, o.(*appsv1.ReplicaSet))
	}
	return out
}
