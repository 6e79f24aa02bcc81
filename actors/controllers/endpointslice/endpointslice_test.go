package endpointslice_test

import (
	"context"
	"net/url"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/endpointslice"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/simnode"
)

func slices(t *testing.T, cp *controlplane.ControlPlane, svc string) []*discoveryv1.EndpointSlice {
	t.Helper()
	objs, _, err := cp.Client.List(context.Background(), controllerkit.MustKind("discovery.k8s.io", "endpointslices"), "default",
		url.Values{"labelSelector": {discoveryv1.LabelServiceName + "=" + svc}})
	if err != nil {
		t.Fatal(err)
	}
	var out []*discoveryv1.EndpointSlice
	for _, o := range objs {
		out = append(out, o.(*discoveryv1.EndpointSlice))
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i].Ports) > len(out[j].Ports) })
	return out
}

func pod(name, node string, named bool, finalizers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}, Finalizers: finalizers},
		Spec: ct.Template("web", "img").Spec}
	p.Spec.NodeName = node
	if !named {
		p.Spec.Containers[0].Ports = nil
	}
	return p
}

func TestSlicesFollowPods(t *testing.T) {
	cp := ct.Start(t)
	ctx := ct.Ctx(t)
	ct.Spawn(t, cp, "endpointslice", endpointslice.New(endpointslice.Config{Informers: cp.Informers, Client: cp.Client}))
	ct.Spawn(t, cp, "simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Nodes: 2}))
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"},
		Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromString("http")},
			{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt(9091)},
		}}}
	out, err := cp.Client.Create(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	svc = out.(*corev1.Service)
	// Selected but nothing running: one empty slice.
	ct.Wait(t, func() error {
		s := slices(t, cp, "web")
		if len(s) != 1 || len(s[0].Endpoints) != 0 {
			return ct.Errorf("%d slices", len(s))
		}
		return nil
	})
	for i, p := range []*corev1.Pod{pod("a", "sim-0", true), pod("b", "sim-1", true), pod("c", "sim-0", false), pod("held", "sim-1", true, "test.skiff.sh/hold")} {
		if _, err := cp.Client.Create(ctx, p); err != nil {
			t.Fatal(i, err)
		}
	}
	ct.Wait(t, func() error {
		s := slices(t, cp, "web")
		if len(s) != 2 || len(s[0].Endpoints) != 3 || len(s[1].Endpoints) != 1 {
			return ct.Errorf("slices %v", s)
		}
		return nil
	})
	s := slices(t, cp, "web")
	full, partial := s[0], s[1]
	for _, sl := range s {
		if sl.AddressType != discoveryv1.AddressTypeIPv4 || sl.Labels[discoveryv1.LabelManagedBy] != endpointslice.ManagedBy || !controllerkit.IsOwnedBy(sl, svc) {
			t.Fatalf("slice metadata: %+v", sl.ObjectMeta)
		}
	}
	if len(full.Ports) != 2 || *full.Ports[0].Port != 8080 || *full.Ports[0].Name != "http" || *full.Ports[1].Port != 9091 {
		t.Fatalf("named port not resolved: %+v", full.Ports)
	}
	if len(partial.Ports) != 1 || *partial.Ports[0].Name != "metrics" || *partial.Endpoints[0].TargetRef != (corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "c", UID: ct.Get[*corev1.Pod](t, cp, "", "pods", "default", "c").UID}) {
		t.Fatalf("pod without the named port: %+v", partial)
	}
	for _, ep := range full.Endpoints {
		if !*ep.Conditions.Ready || !*ep.Conditions.Serving || *ep.Conditions.Terminating || ep.NodeName == nil || ep.TargetRef == nil {
			t.Fatalf("endpoint %+v", ep)
		}
	}

	// A terminating pod stays listed (serving, not ready); a deleted one goes.
	podKind := controllerkit.MustKind("", "pods")
	if err := cp.Client.Delete(ctx, podKind, "default", "held", nil); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Delete(ctx, podKind, "default", "a", nil); err != nil {
		t.Fatal(err)
	}
	ct.Wait(t, func() error {
		s := slices(t, cp, "web")
		if len(s) != 2 || len(s[0].Endpoints) != 2 {
			return ct.Errorf("slices %v", s)
		}
		for _, ep := range s[0].Endpoints {
			switch ep.TargetRef.Name {
			case "held":
				if *ep.Conditions.Ready || !*ep.Conditions.Serving || !*ep.Conditions.Terminating {
					return ct.Errorf("terminating endpoint %+v", ep.Conditions)
				}
			case "b":
			default:
				return ct.Errorf("unexpected endpoint %s", ep.TargetRef.Name)
			}
		}
		return nil
	})
	// Release the held pod so the control plane can shut down cleanly.
	ct.Wait(t, func() error {
		p, err := ct.TryGet[*corev1.Pod](cp, "", "pods", "default", "held")
		if err != nil {
			return err
		}
		p.Finalizers = nil
		_, err = cp.Client.Update(ctx, p)
		return err
	})
}
