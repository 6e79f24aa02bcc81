package replicaset_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/replicaset"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/simnode"
)

func setup(t *testing.T) (*controlplane.ControlPlane, context.Context) {
	cp := ct.Start(t)
	ct.Spawn(t, cp, "replicaset", replicaset.New(replicaset.Config{Informers: cp.Informers, Client: cp.Client}))
	ct.Spawn(t, cp, "simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Nodes: 2}))
	ct.Binder(t, cp)
	return cp, ct.Ctx(t)
}

func waitReady(t *testing.T, cp *controlplane.ControlPlane, name string, want int32) *appsv1.ReplicaSet {
	t.Helper()
	var rs *appsv1.ReplicaSet
	ct.Wait(t, func() error {
		rs = ct.Get[*appsv1.ReplicaSet](t, cp, "apps", "replicasets", "default", name)
		s := rs.Status
		if s.Replicas != want || s.ReadyReplicas != want || s.AvailableReplicas != want || s.FullyLabeledReplicas != want || s.ObservedGeneration != rs.Generation {
			return ct.Errorf("status %+v (generation %d), want %d", s, rs.Generation, want)
		}
		return nil
	})
	return rs
}

func TestCreatesScalesAndReplacesPods(t *testing.T) {
	cp, ctx := setup(t)
	if _, err := cp.Client.Create(ctx, ct.ReplicaSet("web", "web", 3)); err != nil {
		t.Fatal(err)
	}
	rs := waitReady(t, cp, "web", 3)
	pods := ct.Active(ct.ListPods(t, cp, "default", "app=web"))
	if len(pods) != 3 {
		t.Fatalf("want 3 pods, got %d", len(pods))
	}
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if !strings.HasPrefix(p.Name, "web-") || len(p.Name) != len("web-")+5 || ref == nil || ref.UID != rs.UID || ref.Kind != "ReplicaSet" {
			t.Fatalf("pod %s: bad name or controller ref %+v", p.Name, ref)
		}
	}

	// A deleted pod is replaced.
	victim := pods[0]
	if err := cp.Client.Delete(ctx, controllerkit.MustKind("", "pods"), "default", victim.Name, nil); err != nil {
		t.Fatal(err)
	}
	ct.Wait(t, func() error {
		ps := ct.Active(ct.ListPods(t, cp, "default", "app=web"))
		for _, p := range ps {
			if p.Name == victim.Name {
				return ct.Errorf("victim still active")
			}
		}
		if n := ct.CountReady(ps); n != 3 {
			return ct.Errorf("%d ready pods", n)
		}
		return nil
	})

	// Scale up, then down: scale-down removes the newest of equally ready pods and never overshoots.
	scale(t, cp, "web", 5)
	waitReady(t, cp, "web", 5)
	scale(t, cp, "web", 1)
	waitReady(t, cp, "web", 1)
	if n := len(ct.Active(ct.ListPods(t, cp, "default", "app=web"))); n != 1 {
		t.Fatalf("want 1 active pod, got %d", n)
	}
	assertEvent(t, cp, "web", "SuccessfulCreate")
	assertEvent(t, cp, "web", "SuccessfulDelete")
}

func scale(t *testing.T, cp *controlplane.ControlPlane, name string, n int32) {
	t.Helper()
	ct.Wait(t, func() error {
		rs := ct.Get[*appsv1.ReplicaSet](t, cp, "apps", "replicasets", "default", name)
		rs.Spec.Replicas = ptr.To(n)
		_, err := cp.Client.Update(context.Background(), rs)
		return err
	})
}

func assertEvent(t *testing.T, cp *controlplane.ControlPlane, name, reason string) {
	t.Helper()
	ct.Wait(t, func() error {
		objs, _, err := cp.Client.List(context.Background(), controllerkit.MustKind("", "events"), "default", nil)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if e := o.(*corev1.Event); e.InvolvedObject.Name == name && e.Reason == reason && e.Source.Component == replicaset.Name {
				return nil
			}
		}
		return ct.Errorf("no %s event for %s", reason, name)
	})
}

func TestAdoptsAndReleasesBySelector(t *testing.T) {
	cp, ctx := setup(t)
	orphan := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec:       ct.Template("web", "img:1").Spec,
	}
	if _, err := cp.Client.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.Create(ctx, ct.ReplicaSet("web", "web", 2)); err != nil {
		t.Fatal(err)
	}
	rs := waitReady(t, cp, "web", 2)
	p := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", "orphan")
	if !controllerkit.IsOwnedBy(p, rs) {
		t.Fatalf("orphan not adopted: %+v", p.OwnerReferences)
	}
	// Relabel it out of the selector: it is released and replaced.
	ct.Wait(t, func() error {
		p := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", "orphan")
		p.Labels = map[string]string{"app": "other"}
		_, err := cp.Client.Update(ctx, p)
		return err
	})
	ct.Wait(t, func() error {
		p := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", "orphan")
		if len(p.OwnerReferences) != 0 {
			return ct.Errorf("still owned: %+v", p.OwnerReferences)
		}
		return nil
	})
	waitReady(t, cp, "web", 2)
}

func TestSurvivesActorRestart(t *testing.T) {
	cp := ct.Start(t)
	ctx := ct.Ctx(t)
	pid := ct.Spawn(t, cp, "replicaset", replicaset.New(replicaset.Config{Informers: cp.Informers, Client: cp.Client}))
	ct.Spawn(t, cp, "simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Nodes: 1}))
	ct.Binder(t, cp)
	if _, err := cp.Client.Create(ctx, ct.ReplicaSet("web", "web", 2)); err != nil {
		t.Fatal(err)
	}
	waitReady(t, cp, "web", 2)
	cp.Actors.Send(pid, &actorkit.Crash{})
	scale(t, cp, "web", 4)
	waitReady(t, cp, "web", 4)
	if n := len(ct.Active(ct.ListPods(t, cp, "default", "app=web"))); n != 4 {
		t.Fatalf("want 4 pods after restart, got %d", n)
	}
}

// TestPodChangesThatOnlyMoveCountsAreBatched: a sync walks all of a ReplicaSet's pods, so pod
// updates that change no ownership, labels or activity wake it at most once per batch period,
// not once each; a pod that stops being active is still replaced.
func TestPodChangesThatOnlyMoveCountsAreBatched(t *testing.T) {
	cp, ctx := setup(t)
	const n = 20
	if _, err := cp.Client.Create(ctx, ct.ReplicaSet("web", "web", n)); err != nil {
		t.Fatal(err)
	}
	waitReady(t, cp, "web", n)
	settled := settledReconciles(t)
	for _, p := range ct.Active(ct.ListPods(t, cp, "default", "app=web")) {
		p.Annotations = map[string]string{"touched": "yes"}
		if _, err := cp.Client.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	after := settledReconciles(t)
	if d := after - settled; d < 1 || d > n/2 {
		t.Fatalf("%d pod updates caused %d ReplicaSet syncs, want between 1 and %d (batched)", n, d, n/2)
	}

	// A pod that fails is replaced: the sync for it is not left waiting for a batch.
	victim := ct.Active(ct.ListPods(t, cp, "default", "app=web"))[0]
	victim.Status.Phase = corev1.PodFailed
	if _, err := cp.Client.UpdateStatus(ctx, victim); err != nil {
		t.Fatal(err)
	}
	waitReady(t, cp, "web", n)
}

// settledReconciles waits until the ReplicaSet controller has not reconciled for two seconds
// (longer than any batch window), then returns how many reconciles it has done.
func settledReconciles(t *testing.T) uint64 {
	t.Helper()
	last, stable := reconciles(t), 0
	for stable < 10 {
		time.Sleep(200 * time.Millisecond)
		if now := reconciles(t); now != last {
			last, stable = now, 0
			continue
		}
		stable++
	}
	return last
}

func reconciles(t *testing.T) uint64 {
	t.Helper()
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for _, f := range families {
		if f.GetName() != "skiff_controller_reconcile_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == replicaset.Name {
					total += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return total
}

// A ReplicaSet whose status alone changed (its own status write coming back) is synced after
// the batch period, not at once: otherwise every status write's echo syncs and writes again.
func TestAStatusOnlyChangeOfTheReplicaSetWaitsForTheBatch(t *testing.T) {
	cp, ctx := setup(t)
	if _, err := cp.Client.Create(ctx, ct.ReplicaSet("web", "web", 2)); err != nil {
		t.Fatal(err)
	}
	rs := waitReady(t, cp, "web", 2)
	settled := settledReconciles(t)
	rs.Status.Conditions = append(rs.Status.Conditions, appsv1.ReplicaSetCondition{Type: "Probe", Status: corev1.ConditionTrue})
	wrote := time.Now()
	if _, err := cp.Client.UpdateStatus(ctx, rs); err != nil {
		t.Fatal(err)
	}
	for reconciles(t) == settled {
		if time.Since(wrote) > 10*time.Second {
			t.Fatal("the status change was never synced")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A 2-pod ReplicaSet's window is the shortest, 100 ms from the event, which came before the
	// write returned.
	if waited := time.Since(wrote); waited < 50*time.Millisecond {
		t.Fatalf("synced %v after a status-only change, want it batched (about 100ms)", waited)
	}
}

// fullyLabeledReplicas counts the pods carrying every template label, the selector's and the
// others: a pod that loses a label the selector does not need still counts as a replica.
func TestFullyLabeledCountsTemplateLabelsBeyondTheSelector(t *testing.T) {
	cp, ctx := setup(t)
	rs := ct.ReplicaSet("web", "web", 3)
	rs.Spec.Template.Labels["tier"] = "front"
	if _, err := cp.Client.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	waitReady(t, cp, "web", 3)
	p := ct.Active(ct.ListPods(t, cp, "default", "app=web"))[0]
	delete(p.Labels, "tier")
	if _, err := cp.Client.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	ct.Wait(t, func() error {
		s := ct.Get[*appsv1.ReplicaSet](t, cp, "apps", "replicasets", "default", "web").Status
		if s.Replicas != 3 || s.FullyLabeledReplicas != 2 {
			return ct.Errorf("status %+v, want 3 replicas of which 2 fully labeled", s)
		}
		return nil
	})
}

// setReady writes a pod's status as a kubelet would: Running, with the Ready condition given.
func setReady(t *testing.T, cp *controlplane.ControlPlane, p *corev1.Pod, ready corev1.ConditionStatus) {
	t.Helper()
	ct.Wait(t, func() error {
		cur := ct.Get[*corev1.Pod](t, cp, "", "pods", p.Namespace, p.Name)
		cur.Status.Phase = corev1.PodRunning
		cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Now()}}
		_, err := cp.Client.UpdateStatus(context.Background(), cur)
		return err
	})
}

// The ready and available counts follow each pod's readiness, both ways: a Deployment-style
// ReplicaSet (the selector holds every template label, minReadySeconds 0) counts them from the
// ready-pods index instead of walking its pods.
func TestReadyCountFollowsEachPodsReadiness(t *testing.T) {
	cp := ct.Start(t)
	ct.Spawn(t, cp, "replicaset", replicaset.New(replicaset.Config{Informers: cp.Informers, Client: cp.Client}))
	ctx := ct.Ctx(t)
	if _, err := cp.Client.Create(ctx, ct.ReplicaSet("web", "web", 3)); err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	ct.Wait(t, func() error {
		if pods = ct.Active(ct.ListPods(t, cp, "default", "app=web")); len(pods) != 3 {
			return ct.Errorf("%d pods, want 3", len(pods))
		}
		return nil
	})
	want := func(ready int32) {
		t.Helper()
		ct.Wait(t, func() error {
			s := ct.Get[*appsv1.ReplicaSet](t, cp, "apps", "replicasets", "default", "web").Status
			if s.Replicas != 3 || s.ReadyReplicas != ready || s.AvailableReplicas != ready || s.FullyLabeledReplicas != 3 {
				return ct.Errorf("status %+v, want 3 replicas, %d ready and available", s, ready)
			}
			return nil
		})
	}
	want(0)
	for _, p := range pods {
		setReady(t, cp, p, corev1.ConditionTrue)
	}
	want(3)
	setReady(t, cp, pods[1], corev1.ConditionFalse)
	want(2)
	setReady(t, cp, pods[1], corev1.ConditionTrue)
	want(3)
}
