package deployment_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/deployment"
	"github.com/skiff-sh/skiff/actors/controllers/replicaset"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/simnode"
)

func setup(t *testing.T, withNodes bool) (*controlplane.ControlPlane, context.Context) {
	cp := ct.Start(t)
	ct.Spawn(t, cp, "deployment", deployment.New(deployment.Config{Informers: cp.Informers, Client: cp.Client}))
	ct.Spawn(t, cp, "replicaset", replicaset.New(replicaset.Config{Informers: cp.Informers, Client: cp.Client}))
	if withNodes {
		ct.Spawn(t, cp, "simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Nodes: 3}))
		ct.Binder(t, cp)
	}
	return cp, ct.Ctx(t)
}

func getD(t *testing.T, cp *controlplane.ControlPlane, name string) *appsv1.Deployment {
	return ct.Get[*appsv1.Deployment](t, cp, "apps", "deployments", "default", name)
}

// update re-reads, edits and writes the Deployment until it is not a conflict.
func update(t *testing.T, cp *controlplane.ControlPlane, name string, edit func(d *appsv1.Deployment)) {
	t.Helper()
	ct.Wait(t, func() error {
		d := getD(t, cp, name)
		edit(d)
		_, err := cp.Client.Update(context.Background(), d)
		return err
	})
}

func waitComplete(t *testing.T, cp *controlplane.ControlPlane, name, image string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	ct.Wait(t, func() error {
		d = getD(t, cp, name)
		n := *d.Spec.Replicas
		s := d.Status
		if s.ObservedGeneration < d.Generation || s.Replicas != n || s.UpdatedReplicas != n || s.AvailableReplicas != n || s.ReadyReplicas != n {
			return ct.Errorf("status %+v", s)
		}
		pods := ct.Active(ct.ListPods(t, cp, "default", "app="+name))
		if len(pods) != int(n) || ct.CountReady(pods) != int(n) {
			return ct.Errorf("%d active pods, %d ready", len(pods), ct.CountReady(pods))
		}
		for _, p := range pods {
			if p.Spec.Containers[0].Image != image {
				return ct.Errorf("pod %s runs %s", p.Name, p.Spec.Containers[0].Image)
			}
		}
		return nil
	})
	return d
}

func ownedRSs(t *testing.T, cp *controlplane.ControlPlane, d *appsv1.Deployment) []*appsv1.ReplicaSet {
	objs, _, err := cp.Client.List(context.Background(), controllerkit.MustKind("apps", "replicasets"), "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []*appsv1.ReplicaSet
	for _, o := range objs {
		if rs := o.(*appsv1.ReplicaSet); controllerkit.IsOwnedBy(rs, d) {
			out = append(out, rs)
		}
	}
	return out
}

func rsWithImage(t *testing.T, cp *controlplane.ControlPlane, d *appsv1.Deployment, image string) *appsv1.ReplicaSet {
	for _, rs := range ownedRSs(t, cp, d) {
		if rs.Spec.Template.Spec.Containers[0].Image == image {
			return rs
		}
	}
	return nil
}

// rollingBounds asserts, after every pod change, at most replicas+surge pods and at least
// replicas-unavailable ready pods (terminating pods count for neither).
func rollingBounds(app string, replicas, surge, unavailable int) func([]runtime.Object) error {
	return func(objs []runtime.Object) error {
		var pods []*corev1.Pod
		for _, o := range objs {
			if p := o.(*corev1.Pod); p.Labels["app"] == app {
				pods = append(pods, p)
			}
		}
		active, ready := len(ct.Active(pods)), ct.CountReady(pods)
		if active > replicas+surge {
			return ct.Errorf("%d pods > %d+%d", active, replicas, surge)
		}
		if ready < replicas-unavailable {
			return ct.Errorf("%d ready pods < %d-%d", ready, replicas, unavailable)
		}
		return nil
	}
}

func TestRollingUpdateStaysWithinBoundsAndRollsBack(t *testing.T) {
	for _, tc := range []struct {
		name               string
		replicas           int32
		surge, unavailable int
	}{{"surge", 3, 1, 0}, {"unavailable", 4, 0, 1}, {"both", 5, 2, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			cp, ctx := setup(t, true)
			d := ct.Deployment("web", "web", tc.replicas)
			d.Spec.RevisionHistoryLimit = ptr.To(int32(1))
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt(tc.surge)), MaxUnavailable: ptr.To(intstr.FromInt(tc.unavailable))}}
			if _, err := cp.Client.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			d = waitComplete(t, cp, "web", "img:1")
			if d.Annotations[deployment.RevisionAnnotation] != "1" {
				t.Fatalf("revision %q, want 1", d.Annotations[deployment.RevisionAnnotation])
			}
			rs1 := rsWithImage(t, cp, d, "img:1")
			if rs1 == nil || rs1.Labels[deployment.HashLabel] == "" || rs1.Name != "web-"+rs1.Labels[deployment.HashLabel] ||
				rs1.Spec.Selector.MatchLabels[deployment.HashLabel] != rs1.Labels[deployment.HashLabel] {
				t.Fatalf("first ReplicaSet not named by its template hash: %+v", rs1)
			}

			iv := ct.WatchInvariant(t, cp, "", "pods", rollingBounds("web", int(tc.replicas), tc.surge, tc.unavailable))
			iv.Start()
			update(t, cp, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "img:2" })
			d = waitComplete(t, cp, "web", "img:2")
			if v, n := iv.Stop(); len(v) > 0 || n == 0 {
				t.Fatalf("rollout broke its bounds (%d changes checked): %v", n, v)
			}
			if d.Annotations[deployment.RevisionAnnotation] != "2" {
				t.Fatalf("revision %q, want 2", d.Annotations[deployment.RevisionAnnotation])
			}
			rs2 := rsWithImage(t, cp, d, "img:2")

			// Rollback, as `rollout undo` does it: the old ReplicaSet's template goes back in.
			iv.Start()
			update(t, cp, "web", func(d *appsv1.Deployment) {
				tmpl := rs1.Spec.Template.DeepCopy()
				delete(tmpl.Labels, deployment.HashLabel)
				d.Spec.Template = *tmpl
			})
			d = waitComplete(t, cp, "web", "img:1")
			if v, _ := iv.Stop(); len(v) > 0 {
				t.Fatalf("rollback broke its bounds: %v", v)
			}
			back := rsWithImage(t, cp, d, "img:1")
			if back.UID != rs1.UID || back.Annotations[deployment.RevisionAnnotation] != "3" || *back.Spec.Replicas != tc.replicas {
				t.Fatalf("rollback did not reuse the first ReplicaSet at revision 3: %s rev %s", back.Name, back.Annotations[deployment.RevisionAnnotation])
			}
			if got := rsWithImage(t, cp, d, "img:2"); got == nil || *got.Spec.Replicas != 0 || got.UID != rs2.UID {
				t.Fatalf("second ReplicaSet not scaled to 0: %+v", got)
			}
			cond := condition(d, appsv1.DeploymentProgressing)
			if cond == nil || cond.Reason != deployment.ReasonNewRSAvailable {
				t.Fatalf("Progressing = %+v", cond)
			}
			if c := condition(d, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue {
				t.Fatalf("Available = %+v", c)
			}

			// A third template: with revisionHistoryLimit 1 only one old ReplicaSet is kept.
			update(t, cp, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "img:3" })
			d = waitComplete(t, cp, "web", "img:3")
			ct.Wait(t, func() error {
				if n := len(ownedRSs(t, cp, d)); n != 2 {
					return ct.Errorf("%d ReplicaSets, want 2 (new + 1 of history)", n)
				}
				return nil
			})
			if rsWithImage(t, cp, d, "img:1") == nil {
				t.Fatal("the newest old ReplicaSet (img:1, revision 3) should be the one kept")
			}
		})
	}
}

func condition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == typ {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

func TestRecreateNeverMixesVersions(t *testing.T) {
	cp, ctx := setup(t, true)
	d := ct.Deployment("web", "web", 3)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	if _, err := cp.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitComplete(t, cp, "web", "img:1")
	iv := ct.WatchInvariant(t, cp, "", "pods", func(objs []runtime.Object) error {
		images := map[string]bool{}
		for _, o := range objs {
			if p := o.(*corev1.Pod); p.Labels["app"] == "web" {
				images[p.Spec.Containers[0].Image] = true // terminating pods too: Recreate waits for them
			}
		}
		if len(images) > 1 {
			return ct.Errorf("versions side by side: %v", images)
		}
		return nil
	})
	iv.Start()
	update(t, cp, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "img:2" })
	waitComplete(t, cp, "web", "img:2")
	if v, n := iv.Stop(); len(v) > 0 || n == 0 {
		t.Fatalf("Recreate mixed versions (%d changes): %v", n, v)
	}
}

func TestProgressDeadlineExceeded(t *testing.T) {
	cp, ctx := setup(t, false) // no nodes: pods never run
	d := ct.Deployment("stuck", "stuck", 2)
	d.Spec.ProgressDeadlineSeconds = ptr.To(int32(1))
	if _, err := cp.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	ct.Wait(t, func() error {
		d := getD(t, cp, "stuck")
		c := condition(d, appsv1.DeploymentProgressing)
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != deployment.ReasonTimedOut {
			return ct.Errorf("Progressing = %+v", c)
		}
		if a := condition(d, appsv1.DeploymentAvailable); a == nil || a.Status != corev1.ConditionFalse {
			return ct.Errorf("Available = %+v", a)
		}
		return nil
	})
}

func TestPausedDeploymentDoesNotRollOut(t *testing.T) {
	cp, ctx := setup(t, true)
	if _, err := cp.Client.Create(ctx, ct.Deployment("web", "web", 2)); err != nil {
		t.Fatal(err)
	}
	waitComplete(t, cp, "web", "img:1")
	update(t, cp, "web", func(d *appsv1.Deployment) {
		d.Spec.Paused = true
		d.Spec.Template.Spec.Containers[0].Image = "img:2"
		d.Spec.Replicas = ptr.To(int32(3))
	})
	ct.Wait(t, func() error {
		d := getD(t, cp, "web")
		c := condition(d, appsv1.DeploymentProgressing)
		if d.Status.ObservedGeneration < d.Generation || c == nil || c.Reason != deployment.ReasonPaused {
			return ct.Errorf("Progressing = %+v", c)
		}
		if d.Status.Replicas != 3 || d.Status.AvailableReplicas != 3 {
			return ct.Errorf("paused scale: %+v", d.Status)
		}
		return nil
	})
	d := getD(t, cp, "web")
	if rsWithImage(t, cp, d, "img:2") != nil || len(ownedRSs(t, cp, d)) != 1 {
		t.Fatal("a paused Deployment created a new ReplicaSet")
	}
	update(t, cp, "web", func(d *appsv1.Deployment) { d.Spec.Paused = false })
	waitComplete(t, cp, "web", "img:2")
}
