package endpoints_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/endpoints"
	"github.com/skiff-sh/skiff/actors/controllers/endpointslice"
	"github.com/skiff-sh/skiff/actors/controlplane"
)

func getEndpoints(cp *controlplane.ControlPlane, name string) (*corev1.Endpoints, error) {
	return ct.TryGet[*corev1.Endpoints](cp, "", "endpoints", "default", name)
}

// setReady writes the pod's status as its kubelet would: running with an IP, ready or not.
func setReady(t *testing.T, cp *controlplane.ControlPlane, name, ip string, ready bool) {
	t.Helper()
	p := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", name)
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}
	if _, err := cp.Client.UpdateStatus(ct.Ctx(t), p); err != nil {
		t.Fatal(err)
	}
}

func TestEndpointsFollowSlices(t *testing.T) {
	cp := ct.Start(t)
	ctx := ct.Ctx(t)
	cfg := controllerkit.Config{Informers: cp.Informers, Client: cp.Client}
	ct.Spawn(t, cp, "endpointslice", endpointslice.New(cfg))
	ct.Spawn(t, cp, "endpoints", endpoints.New(cfg))
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"tier": "front"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}}
	if _, err := cp.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	// Selected but nothing running: Endpoints with no subsets, labelled like the Service.
	ct.Wait(t, func() error {
		ep, err := getEndpoints(cp, "web")
		if err != nil || len(ep.Subsets) != 0 || ep.Labels["tier"] != "front" {
			return ct.Errorf("endpoints %+v, %v", ep, err)
		}
		return nil
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: ct.Template("web", "img").Spec}
	pod.Spec.NodeName = "n1"
	if _, err := cp.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	setReady(t, cp, "a", "10.244.0.5", false)
	want := func(ready, notReady int) {
		t.Helper()
		ct.Wait(t, func() error {
			ep, err := getEndpoints(cp, "web")
			if err != nil {
				return err
			}
			var r, nr int
			for _, ss := range ep.Subsets {
				r, nr = r+len(ss.Addresses), nr+len(ss.NotReadyAddresses)
				if len(ss.Ports) != 1 || ss.Ports[0].Port != 8080 || ss.Ports[0].Name != "http" || ss.Ports[0].Protocol != corev1.ProtocolTCP {
					return ct.Errorf("ports %+v", ss.Ports)
				}
				for _, a := range append(ss.Addresses, ss.NotReadyAddresses...) {
					if a.IP != "10.244.0.5" || a.TargetRef == nil || a.TargetRef.Name != "a" || a.NodeName == nil || *a.NodeName != "n1" {
						return ct.Errorf("address %+v", a)
					}
				}
			}
			if r != ready || nr != notReady {
				return ct.Errorf("%d ready, %d not ready addresses: %+v", r, nr, ep.Subsets)
			}
			return nil
		})
	}
	want(0, 1)
	setReady(t, cp, "a", "10.244.0.5", true) // the pod becomes ready
	want(1, 0)
	// A user's edit of controlled Endpoints is put back.
	ep, _ := getEndpoints(cp, "web")
	ep.Subsets = nil
	if _, err := cp.Client.Update(ctx, ep); err != nil {
		t.Fatal(err)
	}
	want(1, 0)
	// Endpoints of a Service without a selector are the user's.
	manual := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "default"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432}}}}
	if _, err := cp.Client.Create(ctx, manual); err != nil {
		t.Fatal(err)
	}
	mine := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "default"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.10"}}, Ports: []corev1.EndpointPort{{Port: 5432}}}}}
	if _, err := cp.Client.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	// The Service deleted: its Endpoints go with it; the user's stay while their Service does.
	if err := cp.Client.Delete(ctx, controllerkit.MustKind("", "services"), "default", "web", nil); err != nil {
		t.Fatal(err)
	}
	ct.Wait(t, func() error {
		if _, err := getEndpoints(cp, "web"); !apierrors.IsNotFound(err) {
			return ct.Errorf("endpoints of a deleted service: %v", err)
		}
		return nil
	})
	if got, err := getEndpoints(cp, "ext"); err != nil || len(got.Subsets) != 1 || got.Subsets[0].Addresses[0].IP != "192.0.2.10" {
		t.Fatalf("user's endpoints changed: %+v %v", got, err)
	}
}
