package apiserver

import (
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/schemas"
)

// created is obj as stored after its create by manager: managed fields tracked, an hour old,
// so a write now moves the writer's timestamp.
func created(t *testing.T, group, version, resource string, obj runtime.Object, manager string) (*schemas.Kind, runtime.Object) {
	t.Helper()
	k, ok := schemas.ByResource(group, version, resource)
	if !ok {
		t.Fatalf("no kind %s/%s %s", group, version, resource)
	}
	out := trackUpdate(k, "", k.New(), obj, writeOptions{fieldManager: manager})
	m := mustMeta(out)
	fields := m.GetManagedFields()
	if len(fields) == 0 {
		t.Fatal("create tracked no managed fields")
	}
	for i := range fields {
		fields[i].Time = &metav1.Time{Time: time.Now().Add(-time.Hour).UTC().Truncate(time.Second)}
	}
	m.SetUID("u1")
	return k, out
}

// sameTracking: the fast path's entries are the field manager's, timestamps moved alike.
func sameTracking(t *testing.T, live []metav1.ManagedFieldsEntry, fast, full []metav1.ManagedFieldsEntry) {
	t.Helper()
	if len(fast) != len(full) {
		t.Fatalf("fast path has %d entries, the field manager %d:\n%v\n%v", len(fast), len(full), fast, full)
	}
	moved := func(es []metav1.ManagedFieldsEntry, i int) bool { return !es[i].Time.Equal(live[i].Time) }
	for i := range full {
		f, g := fast[i], full[i]
		if f.Manager != g.Manager || f.Operation != g.Operation || f.APIVersion != g.APIVersion || f.Subresource != g.Subresource ||
			string(f.FieldsV1.Raw) != string(g.FieldsV1.Raw) {
			t.Fatalf("entry %d: fast path %+v, field manager %+v", i, f, g)
		}
		if moved(fast, i) != moved(full, i) {
			t.Fatalf("entry %d (%s): timestamp moved by the fast path %v, by the field manager %v", i, f.Manager, moved(fast, i), moved(full, i))
		}
	}
}

func TestOwnedUpdateMatchesTheFieldManager(t *testing.T) {
	now := metav1.NewMicroTime(time.Now())
	k, live := created(t, "coordination.k8s.io", "v1", "leases", &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "kube-node-lease", Labels: map[string]string{"zone": "a"}},
		Spec:       coordv1.LeaseSpec{HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &now},
	}, "node")
	lease := func(change func(*coordv1.Lease)) runtime.Object {
		l := live.DeepCopyObject().(*coordv1.Lease)
		change(l)
		return l
	}
	cases := []struct {
		name    string
		next    runtime.Object
		manager string
		fast    bool
	}{
		{"renewal by its owner", lease(func(l *coordv1.Lease) {
			l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now.Add(10 * time.Second)))
		}), "node", true},
		{"renewal without managedFields sent", lease(func(l *coordv1.Lease) {
			l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now.Add(10 * time.Second)))
			l.ManagedFields = nil
		}), "node", true},
		{"an owned label's value", lease(func(l *coordv1.Lease) { l.Labels["zone"] = "b" }), "node", true},
		{"no change", lease(func(*coordv1.Lease) {}), "node", true},
		{"renewal by another manager", lease(func(l *coordv1.Lease) {
			l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now.Add(10 * time.Second)))
		}), "other", false},
		{"a field set", lease(func(l *coordv1.Lease) { l.Spec.AcquireTime = &now }), "node", false},
		{"a field cleared", lease(func(l *coordv1.Lease) { l.Spec.HolderIdentity = nil }), "node", false},
		{"a label added", lease(func(l *coordv1.Lease) { l.Labels["rack"] = "1" }), "node", false},
		{"managedFields rewritten", lease(func(l *coordv1.Lease) { l.ManagedFields[0].Manager = "x" }), "node", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			liveFields := mustMeta(live).GetManagedFields()
			fast, ok := ownedUpdate(k, "", live, c.next.DeepCopyObject(), c.manager)
			if ok != c.fast {
				t.Fatalf("fast path taken: %v, want %v", ok, c.fast)
			}
			fm, err := fieldManagerFor(k, "")
			if err != nil {
				t.Fatal(err)
			}
			full := mustMeta(fm.UpdateNoErrors(live, c.next.DeepCopyObject(), c.manager)).GetManagedFields()
			if ok {
				sameTracking(t, liveFields, fast, full)
			}
		})
	}
}

// Shared ownership, lists and another manager's fields go to the field manager.
func TestOwnedUpdateLeavesListsAndOthersFieldsToTheFieldManager(t *testing.T) {
	k, live := created(t, "", "v1", "pods", benchPod(), "kubectl")
	status, ok := ownedUpdate(k, "status", live, live.DeepCopyObject(), "skiff-node")
	if ok {
		t.Fatalf("a manager with no entry took the fast path: %v", status)
	}
	next := live.DeepCopyObject().(*corev1.Pod)
	next.Spec.Containers[0].Image = "img:2"
	if _, ok := ownedUpdate(k, "", live, next, "kubectl"); ok {
		t.Fatal("a changed list element took the fast path")
	}
	next = live.DeepCopyObject().(*corev1.Pod)
	next.Labels["app"] = "db"
	if _, ok := ownedUpdate(k, "", live, next, "other"); ok {
		t.Fatal("a label kubectl owns, written by another manager, took the fast path")
	}
	fast, ok := ownedUpdate(k, "", live, next, "kubectl")
	if !ok {
		t.Fatal("kubectl changing its own label's value did not take the fast path")
	}
	fm, err := fieldManagerFor(k, "")
	if err != nil {
		t.Fatal(err)
	}
	full := mustMeta(fm.UpdateNoErrors(live, next.DeepCopy(), "kubectl")).GetManagedFields()
	sameTracking(t, mustMeta(live).GetManagedFields(), fast, full)
	if !apiequality.Semantic.DeepEqual(mustMeta(live).GetManagedFields()[0].FieldsV1, fast[0].FieldsV1) {
		t.Fatal("the fast path changed the owned fields")
	}
}
