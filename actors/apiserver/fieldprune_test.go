package apiserver

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/schemas"
)

// trackFull must record what the field manager records given the whole objects: the same
// entries, the same fields, the same timestamps moved.
func TestTrackFullMatchesTheFieldManager(t *testing.T) {
	now := metav1.Now()
	k, live := created(t, "", "v1", "pods", &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img",
			Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: "TCP"}}}}},
	}, "kube-controller-manager")
	schemas.Default(live)
	pod := func(change func(*corev1.Pod)) *corev1.Pod {
		p := live.DeepCopyObject().(*corev1.Pod)
		change(p)
		return p
	}
	running := func(p *corev1.Pod) {
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.5", StartTime: &now,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "img", Ready: true}}}
	}
	type tcase struct {
		name, sub, manager string
		live, next         runtime.Object
		narrowed           bool // some top-level field is the same in both
		kind               *schemas.Kind
		split              bool // some entry is left out of the field manager's view
	}
	withKubelet := trackUpdate(k, "status", live, pod(running), writeOptions{fieldManager: "kubelet"})
	// Another manager owning a status field the kubelet then changes, and many managers.
	conditioned := trackUpdate(k, "status", withKubelet, func() runtime.Object {
		p := withKubelet.DeepCopyObject().(*corev1.Pod)
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: "example.com/gate", Status: corev1.ConditionTrue})
		return p
	}(), writeOptions{fieldManager: "gatekeeper"})
	crowded := live
	for i := range 10 {
		crowded = trackUpdate(k, "", crowded, func() runtime.Object {
			p := crowded.DeepCopyObject().(*corev1.Pod)
			p.Annotations = map[string]string{fmt.Sprint("a", i): "x"}
			return p
		}(), writeOptions{fieldManager: fmt.Sprint("annotator-", i)})
	}
	cases := []tcase{
		{"a kubelet's first status write", "status", "kubelet", live, pod(running), true, k, true},
		{"a status write changing a condition", "status", "kubelet", withKubelet,
			pod(func(p *corev1.Pod) {
				running(p)
				p.Status.Conditions[0].Status = corev1.ConditionFalse
				p.Status.PodIP = ""
			}), true, k, true},
		{"a status write taking another's condition", "status", "kubelet", conditioned, func() runtime.Object {
			p := conditioned.DeepCopyObject().(*corev1.Pod)
			p.Status.Conditions[1].Status = corev1.ConditionFalse
			return p
		}(), true, k, true},
		{"a status write changing a label", "status", "kubelet", withKubelet, pod(func(p *corev1.Pod) {
			running(p)
			p.Labels["app"] = "db"
			p.Status.PodIP = "10.0.0.6"
		}), true, k, false},
		{"a status write among many managers", "status", "kubelet", crowded, pod(running), true, k, false},
		{"a spec write leaving status", "", "kubectl", live, pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Image = "img:2"
			p.Spec.ActiveDeadlineSeconds = ptr.To(int64(30))
		}), true, k, false},
		{"a label taken from its owner", "", "kubectl", live, pod(func(p *corev1.Pod) { p.Labels["app"] = "db" }), true, k, false},
		{"a label removed", "", "kubectl", live, pod(func(p *corev1.Pod) { delete(p.Labels, "app") }), true, k, false},
		{"a write changing nothing", "", "kubectl", live, pod(func(*corev1.Pod) {}), true, k, true},
		{"a create", "", "kubectl", k.New(), pod(running), false, k, false},
		{"a create without status (zero in both: no view)", "", "kubectl", k.New(), pod(func(*corev1.Pod) {}), false, k, false},
	}
	dk, dep := created(t, "apps", "v1", "deployments", &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}},
	}, "kubectl")
	scaled := dep.DeepCopyObject().(*appsv1.Deployment)
	scaled.Status = appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 1, Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse}}}
	cases = append(cases, tcase{"a controller's status write", "status", "kube-controller-manager", dep, scaled, true, dk, true})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kind := c.kind
			fm, err := fieldManagerFor(kind, c.sub)
			if err != nil {
				t.Fatal(err)
			}
			_, _, changed, ok := withoutUnchanged(kind, c.live, c.next)
			if ok != c.narrowed {
				t.Fatalf("fields left out: %v, want %v", ok, c.narrowed)
			}
			_, _, split := splitEntries(kind, c.sub, c.manager, mustMeta(c.live).GetManagedFields(), mustMeta(c.next).GetManagedFields(),
				changed, metadataChanged(c.live, c.next))
			if split != c.split {
				t.Fatalf("entries left out: %v, want %v", split, c.split)
			}
			full := mustMeta(fm.UpdateNoErrors(c.live, c.next.DeepCopyObject(), c.manager)).GetManagedFields()
			next := c.next.DeepCopyObject()
			out := trackFull(fm, kind, c.sub, c.live, next, c.manager)
			if out != next {
				t.Fatal("trackFull did not return the object it was given")
			}
			sameEntriesAs(t, mustMeta(c.live).GetManagedFields(), mustMeta(out).GetManagedFields(), full)
			if !sameFieldsAsWritten(c.next, out) {
				t.Fatal("trackFull changed the object beyond its managed fields")
			}
		})
	}
}

// Fuzzed objects of every built-in kind with a status, created by one manager, then written
// by another through /status with another fuzzed status (and some with other labels too):
// trackFull records what the field manager records of the whole objects.
func TestTrackFullMatchesTheFieldManagerOnFuzzedStatusWrites(t *testing.T) {
	f := newFiller(t)
	splits := 0
	for _, k := range builtinKinds(t) {
		if _, ok := topField(k.New(), "status"); !ok || !k.HasSubresource("status") {
			continue
		}
		fm, err := fieldManagerFor(k, "status")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 6 {
			obj := fuzzed(f, k)
			mustMeta(obj).SetManagedFields(nil)
			live := trackUpdate(k, "", newOf(k), obj, writeOptions{fieldManager: "creator"})
			mustMeta(live).SetUID("u1")
			next := live.DeepCopyObject()
			status, _ := topField(next, "status")
			other, _ := topField(fuzzed(f, k), "status")
			status.Set(other)
			if i%3 == 2 {
				mustMeta(next).SetLabels(map[string]string{"changed": fmt.Sprint(i)})
			}
			what := fmt.Sprintf("%s #%d", k.GVK.Kind, i)
			_, _, changed, ok := withoutUnchanged(k, live, next)
			if ok {
				if _, _, split := splitEntries(k, "status", "writer", mustMeta(live).GetManagedFields(), nil, changed, metadataChanged(live, next)); split {
					splits++
				}
			}
			full := mustMeta(fm.UpdateNoErrors(live, next.DeepCopyObject(), "writer")).GetManagedFields()
			got := mustMeta(trackFull(fm, k, "status", live, next.DeepCopyObject(), "writer")).GetManagedFields()
			t.Run(what, func(t *testing.T) { sameEntriesAs(t, mustMeta(live).GetManagedFields(), got, full) })
		}
	}
	if splits < 10 {
		t.Fatalf("only %d writes left an entry out", splits)
	}
}

// sameEntriesAs: got and want hold the same entries in the same order, each with its time
// kept from live or moved, alike.
func sameEntriesAs(t *testing.T, live, got, want []metav1.ManagedFieldsEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d entries, the field manager %d:\n%v\n%v", len(got), len(want), got, want)
	}
	kept := func(e metav1.ManagedFieldsEntry) bool {
		for _, l := range live {
			if l.Manager == e.Manager && l.Operation == e.Operation && l.Subresource == e.Subresource && l.Time.Equal(e.Time) {
				return true
			}
		}
		return false
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Manager != w.Manager || g.Operation != w.Operation || g.APIVersion != w.APIVersion || g.Subresource != w.Subresource ||
			g.FieldsType != w.FieldsType || string(g.FieldsV1.Raw) != string(w.FieldsV1.Raw) {
			t.Fatalf("entry %d: %+v\nthe field manager's: %+v", i, g, w)
		}
		if kept(g) != kept(w) {
			t.Fatalf("entry %d (%s): time kept %v, by the field manager %v", i, g.Manager, kept(g), kept(w))
		}
	}
}

// sameFieldsAsWritten: a and b differ in their managed fields at most.
func sameFieldsAsWritten(a, b runtime.Object) bool {
	a, b = a.DeepCopyObject(), b.DeepCopyObject()
	mustMeta(a).SetManagedFields(nil)
	mustMeta(b).SetManagedFields(nil)
	ea, _ := encodeForStorage(a)
	eb, _ := encodeForStorage(b)
	return string(ea) == string(eb)
}

// Entries of another API version are compared after a conversion that may read any field:
// the field manager then sees the whole objects.
func TestTrackFullKeepsWholeObjectsAcrossVersions(t *testing.T) {
	k, live := created(t, "", "v1", "pods", &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}, "kubectl")
	fields := mustMeta(live).GetManagedFields()
	fields[0].APIVersion = "v2"
	mustMeta(live).SetManagedFields(fields)
	next := live.DeepCopyObject().(*corev1.Pod)
	next.Status.Phase = corev1.PodRunning
	if _, _, _, ok := withoutUnchanged(k, live, next); ok {
		t.Fatal("objects with an entry of another version were narrowed")
	}
}
