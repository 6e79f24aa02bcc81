package servicelb_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/servicelb"
)

func lbService(name string, port int32) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: port}}}}
}

func node(name string, addrs ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
}

// TestIngressFollowsNodes: a LoadBalancer gets every node's address (ExternalIP before
// InternalIP), follows a node's address change and removal, and a second LoadBalancer on the
// same port stays pending until the first goes.
func TestIngressFollowsNodes(t *testing.T) {
	cp := ct.Start(t)
	ct.Spawn(t, cp, "service-lb", servicelb.New(controllerkit.Config{Informers: cp.Informers, Client: cp.Client}))
	ctx := context.Background()
	for _, n := range []*corev1.Node{
		node("a", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}),
		node("b", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.3"}, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "192.0.2.3"}),
	} {
		o, err := cp.Client.Create(ctx, n) // the status is dropped on create, as kube does
		if err != nil {
			t.Fatal(err)
		}
		o.(*corev1.Node).Status = n.Status
		if _, err := cp.Client.UpdateStatus(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*corev1.Service{lbService("first", 80), lbService("second", 80), lbService("other", 81)} {
		if _, err := cp.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	ingress := func(name string, want ...string) func() error {
		return func() error {
			s, err := ct.TryGet[*corev1.Service](cp, "", "services", "default", name)
			if err != nil {
				return err
			}
			var got []string
			for _, in := range s.Status.LoadBalancer.Ingress {
				got = append(got, in.IP)
			}
			if !slices.Equal(got, want) {
				return ct.Errorf("%s: ingress %v, want %v", name, got, want)
			}
			return nil
		}
	}
	ct.Wait(t, ingress("first", "10.0.0.2", "192.0.2.3"))
	ct.Wait(t, ingress("other", "10.0.0.2", "192.0.2.3"))
	ct.Wait(t, ingress("second"))

	nodes := controllerkit.MustKind("", "nodes")
	if err := cp.Client.Delete(ctx, nodes, "", "b", nil); err != nil {
		t.Fatal(err)
	}
	ct.Wait(t, ingress("first", "10.0.0.2"))
	a := ct.Get[*corev1.Node](t, cp, "", "nodes", "", "a")
	a.Status.Addresses[0].Address = "10.0.0.9"
	if _, err := cp.Client.UpdateStatus(ctx, a); err != nil {
		t.Fatal(err)
	}
	ct.Wait(t, ingress("other", "10.0.0.9"))

	if err := cp.Client.Delete(ctx, controllerkit.MustKind("", "services"), "default", "first", nil); err != nil {
		t.Fatal(err)
	}
	ct.Wait(t, ingress("second", "10.0.0.9"))

	// No longer a LoadBalancer: no ingress.
	other := ct.Get[*corev1.Service](t, cp, "", "services", "default", "other")
	other.Spec.Type = corev1.ServiceTypeClusterIP
	other.Spec.ExternalTrafficPolicy = ""
	other.Spec.AllocateLoadBalancerNodePorts = nil
	other.Spec.Ports[0].NodePort = 0
	if _, err := cp.Client.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	ct.Wait(t, ingress("other"))
}
