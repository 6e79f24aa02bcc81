package apiserver_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

// An update that carries no managedFields keeps the stored ones and adds the writer's, as
// kube-apiserver does: controllers write back objects from caches that drop managedFields, and
// must not wipe what other managers own. Both the owned-fields fast path (the creator changing
// its own value) and the full field manager (another manager adding a field) are covered.
func TestUpdateWithoutManagedFieldsKeepsThem(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	cms := newClientset(t, cp.URL()).CoreV1().ConfigMaps("default")
	ctx := context.Background()
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Data: map[string]string{"a": "1"}},
		metav1.CreateOptions{FieldManager: "creator"})
	if err != nil {
		t.Fatal(err)
	}
	managers := func(cm *corev1.ConfigMap) []string {
		var out []string
		for _, e := range cm.ManagedFields {
			out = append(out, e.Manager)
		}
		slices.Sort(out)
		return out
	}
	if got := managers(cm); !slices.Equal(got, []string{"creator"}) {
		t.Fatalf("after create: %v", got)
	}
	update := func(manager string, change func(*corev1.ConfigMap)) *corev1.ConfigMap {
		t.Helper()
		next := cm.DeepCopy()
		next.ManagedFields = nil // as an informer's copy
		change(next)
		out, err := cms.Update(ctx, next, metav1.UpdateOptions{FieldManager: manager})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	cm = update("creator", func(c *corev1.ConfigMap) { c.Data["a"] = "2" })
	if got := managers(cm); !slices.Equal(got, []string{"creator"}) {
		t.Fatalf("after the creator's update without managedFields: %v", got)
	}
	cm = update("controller", func(c *corev1.ConfigMap) { c.Labels = map[string]string{"by": "controller"} })
	if got := managers(cm); !slices.Equal(got, []string{"controller", "creator"}) {
		t.Fatalf("after another manager's update without managedFields: %v", got)
	}
	stored, err := cms.Get(ctx, "m", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(stored); !slices.Equal(got, []string{"controller", "creator"}) || stored.Data["a"] != "2" {
		t.Fatalf("stored: managers %v, data %v", got, stored.Data)
	}
}
