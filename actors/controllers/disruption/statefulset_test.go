package disruption_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/disruption"
	"github.com/skiff-sh/skiff/actors/controllers/statefulset"
	"github.com/skiff-sh/skiff/actors/simnode"
)

// A budget over a StatefulSet's pods scales from the StatefulSet's replicas, as in Kubernetes.
func TestBudgetOverStatefulSet(t *testing.T) {
	cp := ct.Start(t)
	cfg := controllerkit.Config{Informers: cp.Informers, Client: cp.Client}
	ct.Spawn(t, cp, "statefulset", statefulset.New(cfg))
	ct.Spawn(t, cp, "disruption", disruption.New(cfg))
	ct.Spawn(t, cp, "simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Nodes: 2}))
	ct.Binder(t, cp)
	ctx := ct.Ctx(t)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(3)), ServiceName: "web",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: ct.Template("web", "img:1")},
	}
	if _, err := cp.Client.Create(ctx, sts); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.Create(ctx, pdb("web", nil, ptr.To(intstr.FromString("34%")))); err != nil {
		t.Fatal(err)
	}
	// 34% of 3 rounds up to 2 unavailable: 1 must stay healthy, 2 may go.
	waitStatus(t, cp, "web", 3, 1, 3, 2)
}
