package statefulset_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/statefulset"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/actors/simnode"
)

// start runs the controller on a control plane; with nodes, simulated nodes run the pods
// (Running and Ready at once), else the test decides each pod's state itself.
func start(t *testing.T, nodes int) (*controlplane.ControlPlane, context.Context) {
	cp, ctx, _ := startWithPID(t, nodes)
	return cp, ctx
}

// startWithPID is start, also returning the controller actor's PID.
func startWithPID(t *testing.T, nodes int) (*controlplane.ControlPlane, context.Context, *actorkit.PID) {
	cp := ct.Start(t)
	pid := ct.Spawn(t, cp, "statefulset", statefulset.New(statefulset.Config{Informers: cp.Informers, Client: cp.Client}))
	if nodes > 0 {
		ct.Spawn(t, cp, "simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Nodes: nodes}))
		ct.Binder(t, cp)
	}
	return cp, ct.Ctx(t), pid
}

func newSet(name string, replicas int32, mutate ...func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template:    ct.Template(name, "img:1"),
		},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

// journal records, in log order, "+name" for each pod created and "-name" for each deleted.
func journal(t *testing.T, cp *controlplane.ControlPlane) func() []string {
	var mu sync.Mutex
	var out []string
	note := func(prefix string) func(runtime.Object) {
		return func(o runtime.Object) {
			mu.Lock()
			defer mu.Unlock()
			out = append(out, prefix+o.(*corev1.Pod).Name)
		}
	}
	remove := cp.Informers.For("", "pods").AddHandler(informer.Funcs{Add: note("+"), Delete: note("-")})
	t.Cleanup(remove)
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(out)
	}
}

// waitEvents waits until the journal holds n events.
func waitEvents(t *testing.T, events func() []string, n int) {
	t.Helper()
	ct.Wait(t, func() error {
		if got := events(); len(got) < n {
			return ct.Errorf("events %v", got)
		}
		return nil
	})
}

func getSet(t *testing.T, cp *controlplane.ControlPlane, name string) *appsv1.StatefulSet {
	return ct.Get[*appsv1.StatefulSet](t, cp, "apps", "statefulsets", "default", name)
}

// waitStatus waits until the controller has observed the set's latest generation and its
// status satisfies ok: the controller writes status after acting, so what it did is visible.
func waitStatus(t *testing.T, cp *controlplane.ControlPlane, name string, ok func(appsv1.StatefulSetStatus) bool) *appsv1.StatefulSet {
	t.Helper()
	var s *appsv1.StatefulSet
	ct.Wait(t, func() error {
		s = getSet(t, cp, name)
		if s.Status.ObservedGeneration != s.Generation || !ok(s.Status) {
			return ct.Errorf("status %+v (generation %d)", s.Status, s.Generation)
		}
		return nil
	})
	return s
}

func podNames(t *testing.T, cp *controlplane.ControlPlane, app string) []string {
	var names []string
	for _, p := range ct.ListPods(t, cp, "default", "app="+app) {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// setReady plays the kubelet for one pod: Running with Ready as given.
func setReady(t *testing.T, cp *controlplane.ControlPlane, name string, ready bool) {
	t.Helper()
	ct.Wait(t, func() error {
		p, err := ct.TryGet[*corev1.Pod](cp, "", "pods", "default", name)
		if err != nil {
			return err
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
		_, err = cp.Client.UpdateStatus(context.Background(), p)
		return err
	})
}

func scale(t *testing.T, cp *controlplane.ControlPlane, name string, edit func(*appsv1.StatefulSet)) {
	t.Helper()
	ct.Wait(t, func() error {
		s := getSet(t, cp, name)
		edit(s)
		_, err := cp.Client.Update(context.Background(), s)
		return err
	})
}

func TestOrderedReadyCreatesInOrderAndScalesDownInReverse(t *testing.T) {
	cp, ctx := start(t, 0)
	events := journal(t, cp)
	if _, err := cp.Client.Create(ctx, newSet("web", 3)); err != nil {
		t.Fatal(err)
	}
	// Each pod waits for its predecessor to be Running and Ready.
	for i := 0; i < 3; i++ {
		waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.Replicas == int32(i+1) && s.ReadyReplicas == int32(i) })
		want := []string{"web-0", "web-1", "web-2"}[:i+1]
		if got := podNames(t, cp, "web"); !reflect.DeepEqual(got, want) {
			t.Fatalf("with %d ready: pods %v; want %v", i, got, want)
		}
		setReady(t, cp, fmt.Sprintf("web-%d", i), true)
	}
	s := waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.ReadyReplicas == 3 && s.AvailableReplicas == 3 })
	if s.Status.CurrentRevision == "" || s.Status.CurrentRevision != s.Status.UpdateRevision || s.Status.CurrentReplicas != 3 || s.Status.UpdatedReplicas != 3 {
		t.Fatalf("status %+v", s.Status)
	}
	p := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", "web-1")
	if p.Spec.Hostname != "web-1" || p.Spec.Subdomain != "web" || p.Labels[statefulset.PodNameLabel] != "web-1" ||
		p.Labels[statefulset.PodIndexLabel] != "1" || p.Labels[statefulset.RevisionLabel] != s.Status.UpdateRevision || !controllerkit.IsOwnedBy(p, s) {
		t.Fatalf("pod identity: hostname %q subdomain %q labels %v owners %v", p.Spec.Hostname, p.Spec.Subdomain, p.Labels, p.OwnerReferences)
	}

	// An unhealthy condemned pod halts an ordered scale-down while a lower one is unhealthy too.
	setReady(t, cp, "web-1", false)
	setReady(t, cp, "web-2", false)
	waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.ReadyReplicas == 1 }) // seen by the controller
	scale(t, cp, "web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To(int32(1)) })
	waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.ReadyReplicas == 1 })
	if got := podNames(t, cp, "web"); len(got) != 3 {
		t.Fatalf("scale-down went on past unready pods: %v", got)
	}
	// web-2 healthy again: it goes, then web-1 (the first unhealthy pod may go): the highest
	// ordinal first.
	setReady(t, cp, "web-2", true)
	waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.Replicas == 1 && s.ReadyReplicas == 1 })
	want := []string{"+web-0", "+web-1", "+web-2", "-web-2", "-web-1"}
	if got := events(); !reflect.DeepEqual(got, want) {
		t.Fatalf("pod events %v; want %v", got, want)
	}
}

func TestParallelCreatesAndDeletesAtOnce(t *testing.T) {
	cp, ctx := start(t, 0)
	if _, err := cp.Client.Create(ctx, newSet("db", 3, func(s *appsv1.StatefulSet) {
		s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
		s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5}
	})); err != nil {
		t.Fatal(err)
	}
	// No pod is ever ready, yet all three exist: Parallel waits for none.
	waitStatus(t, cp, "db", func(s appsv1.StatefulSetStatus) bool { return s.Replicas == 3 })
	if got, want := podNames(t, cp, "db"), []string{"db-5", "db-6", "db-7"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("pods %v; want %v", got, want)
	}
	scale(t, cp, "db", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To(int32(0)) })
	waitStatus(t, cp, "db", func(s appsv1.StatefulSetStatus) bool { return s.Replicas == 0 })
	if got := podNames(t, cp, "db"); len(got) != 0 {
		t.Fatalf("pods left: %v", got)
	}
}

func TestReplacesDeletedAndFailedPodsUnderTheirNames(t *testing.T) {
	cp, ctx := start(t, 2)
	if _, err := cp.Client.Create(ctx, newSet("web", 3)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.ReadyReplicas == 3 })
	replacePod(t, cp, "web-1")

	failed := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", "web-0")
	failed.Status.Phase = corev1.PodFailed
	if _, err := cp.Client.UpdateStatus(ctx, failed); err != nil {
		t.Fatal(err)
	}
	waitPodReplaced(t, cp, "web-0", failed.UID)
	if got := podNames(t, cp, "web"); !reflect.DeepEqual(got, []string{"web-0", "web-1", "web-2"}) {
		t.Fatalf("pods %v", got)
	}
}

// replacePod deletes the pod and waits for the controller to bring it back under its name.
func replacePod(t *testing.T, cp *controlplane.ControlPlane, name string) {
	t.Helper()
	old := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", name)
	if err := cp.Client.Delete(context.Background(), controllerkit.MustKind("", "pods"), "default", name, nil); err != nil {
		t.Fatal(err)
	}
	waitPodReplaced(t, cp, name, old.UID)
}

func waitPodReplaced(t *testing.T, cp *controlplane.ControlPlane, name string, oldUID any) {
	t.Helper()
	ct.Wait(t, func() error {
		p, err := ct.TryGet[*corev1.Pod](cp, "", "pods", "default", name)
		if err != nil {
			return err
		}
		if p.UID == oldUID || !controllerkit.IsPodReady(p) {
			return ct.Errorf("%s not replaced yet (uid %s, ready %v)", name, p.UID, controllerkit.IsPodReady(p))
		}
		return nil
	})
}

func revisionOf(t *testing.T, cp *controlplane.ControlPlane, pod string) string {
	return ct.Get[*corev1.Pod](t, cp, "", "pods", "default", pod).Labels[statefulset.RevisionLabel]
}

func TestRollingUpdateHonoursPartition(t *testing.T) {
	cp, ctx := start(t, 2)
	if _, err := cp.Client.Create(ctx, newSet("web", 3)); err != nil {
		t.Fatal(err)
	}
	first := waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.ReadyReplicas == 3 && s.CurrentReplicas == 3 })
	scale(t, cp, "web", func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(2))
		s.Spec.Template.Spec.Containers[0].Image = "img:2"
	})
	s := waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool {
		return s.UpdatedReplicas == 1 && s.ReadyReplicas == 3 && s.CurrentReplicas == 2
	})
	if s.Status.CurrentRevision != first.Status.CurrentRevision || s.Status.UpdateRevision == s.Status.CurrentRevision {
		t.Fatalf("revisions %+v", s.Status)
	}
	for pod, rev := range map[string]string{"web-0": s.Status.CurrentRevision, "web-1": s.Status.CurrentRevision, "web-2": s.Status.UpdateRevision} {
		if got := revisionOf(t, cp, pod); got != rev {
			t.Fatalf("%s at %s; want %s", pod, got, rev)
		}
	}
	// Below the partition a replaced pod keeps the current revision.
	replacePod(t, cp, "web-0")
	if got := revisionOf(t, cp, "web-0"); got != s.Status.CurrentRevision {
		t.Fatalf("web-0 recreated at %s; want the current %s", got, s.Status.CurrentRevision)
	}

	scale(t, cp, "web", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(0)) })
	done := waitStatus(t, cp, "web", func(st appsv1.StatefulSetStatus) bool {
		return st.UpdatedReplicas == 3 && st.ReadyReplicas == 3 && st.CurrentRevision == s.Status.UpdateRevision
	})
	if done.Status.CurrentReplicas != 3 {
		t.Fatalf("status %+v", done.Status)
	}
	for _, pod := range []string{"web-0", "web-1", "web-2"} {
		if p := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", pod); p.Spec.Containers[0].Image != "img:2" {
			t.Fatalf("%s runs %s", pod, p.Spec.Containers[0].Image)
		}
	}
	revs, _, err := cp.Client.List(ctx, controllerkit.MustKind("apps", "controllerrevisions"), "default", nil)
	if err != nil || len(revs) != 2 {
		t.Fatalf("controller revisions %d, %v", len(revs), err)
	}
}

func TestOnDeleteUpdatesOnlyDeletedPods(t *testing.T) {
	cp, ctx := start(t, 2)
	if _, err := cp.Client.Create(ctx, newSet("web", 2, func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	})); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.ReadyReplicas == 2 })
	scale(t, cp, "web", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "img:2" })
	s := waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.UpdateRevision != s.CurrentRevision })
	if s.Status.UpdatedReplicas != 0 || s.Status.CurrentReplicas != 2 {
		t.Fatalf("OnDelete replaced pods by itself: %+v", s.Status)
	}
	replacePod(t, cp, "web-1")
	if got := revisionOf(t, cp, "web-1"); got != s.Status.UpdateRevision {
		t.Fatalf("web-1 recreated at %s; want %s", got, s.Status.UpdateRevision)
	}
	if got := revisionOf(t, cp, "web-0"); got != s.Status.CurrentRevision {
		t.Fatalf("web-0 changed to %s", got)
	}
}

func TestRollingUpdateTakesMaxUnavailableDownAtOnce(t *testing.T) {
	cp, ctx := start(t, 0)
	events := journal(t, cp)
	if _, err := cp.Client.Create(ctx, newSet("web", 4, func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromString("50%"))}
	})); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.Replicas == int32(i+1) })
		setReady(t, cp, fmt.Sprintf("web-%d", i), true)
	}
	waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.ReadyReplicas == 4 })
	scale(t, cp, "web", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "img:2" })
	// Two of four may be down: web-3 and web-2 go together, web-2 comes back first; once both
	// are updated and ready, web-1 and web-0 go together.
	for _, step := range []struct {
		at   int
		want []string
	}{{4, []string{"-web-3", "-web-2", "+web-2"}}, {8, []string{"-web-1", "-web-0", "+web-0"}}} {
		waitEvents(t, events, step.at+3)
		if got := events()[step.at : step.at+3]; !reflect.DeepEqual(got, step.want) {
			t.Fatalf("update order %v; want %v", got, step.want)
		}
		setReady(t, cp, step.want[2][1:], true)
		waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.Replicas == 4 })
		setReady(t, cp, step.want[0][1:], true)
	}
	s := waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.UpdatedReplicas == 4 && s.ReadyReplicas == 4 })
	if s.Status.CurrentRevision != s.Status.UpdateRevision {
		t.Fatalf("rollout not complete: %+v", s.Status)
	}
}

func TestAdoptsOrphansByNameAndSelector(t *testing.T) {
	cp, ctx := start(t, 2)
	for _, name := range []string{"web-0", "other-0"} {
		orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}},
			Spec: ct.Template("web", "img:1").Spec}
		if _, err := cp.Client.Create(ctx, orphan); err != nil {
			t.Fatal(err)
		}
	}
	orphanUID := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", "web-0").UID
	// OnDelete keeps the adopted pod as it is (a rolling update would replace it: it carries no
	// revision).
	if _, err := cp.Client.Create(ctx, newSet("web", 2, func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	})); err != nil {
		t.Fatal(err)
	}
	s := waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.ReadyReplicas == 2 })
	if p := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", "web-0"); p.UID != orphanUID || !controllerkit.IsOwnedBy(p, s) {
		t.Fatalf("web-0 not adopted: uid %s owners %v", p.UID, p.OwnerReferences)
	}
	// The adopted pod is given the labels that name it.
	ct.Wait(t, func() error {
		p := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", "web-0")
		if p.Labels[statefulset.PodNameLabel] != "web-0" || p.Labels[statefulset.PodIndexLabel] != "0" {
			return ct.Errorf("labels %v", p.Labels)
		}
		return nil
	})
	// Selected but not named as a member: left alone, as kube does.
	if p := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", "other-0"); len(p.OwnerReferences) != 0 {
		t.Fatalf("other-0 adopted: %v", p.OwnerReferences)
	}
}

func TestSurvivesActorRestart(t *testing.T) {
	cp, ctx, pid := startWithPID(t, 1)
	if _, err := cp.Client.Create(ctx, newSet("web", 2)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.ReadyReplicas == 2 })
	cp.Actors.Send(pid, &actorkit.Crash{})
	scale(t, cp, "web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To(int32(4)) })
	waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.ReadyReplicas == 4 })
	if got, want := podNames(t, cp, "web"), []string{"web-0", "web-1", "web-2", "web-3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("pods after restart %v; want %v", got, want)
	}
}

func TestOrderedReadyWaitsForMinReadySeconds(t *testing.T) {
	cp, ctx := start(t, 0)
	if _, err := cp.Client.Create(ctx, newSet("web", 2, func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = 3 })); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.Replicas == 1 })
	setReady(t, cp, "web-0", true)
	// Ready but not yet available (at least 2 s of the 3: the condition's time is kept in whole
	// seconds): web-1 waits.
	waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.ReadyReplicas == 1 && s.AvailableReplicas == 0 })
	if got := podNames(t, cp, "web"); !reflect.DeepEqual(got, []string{"web-0"}) {
		t.Fatalf("web-1 created before web-0 was available: %v", got)
	}
	// Available later, with no event of its own: the controller wakes itself.
	waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.AvailableReplicas == 1 && s.Replicas == 2 })
}
