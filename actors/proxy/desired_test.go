package proxy

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/bpf/lb"
)

func svc(ip string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:       corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}, Ports: ports},
	}
}

type ep struct {
	addr                        string
	ready, serving, terminating *bool
	node                        string
}

func slice(port int32, name string, proto corev1.Protocol, eps ...ep) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-x", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(name), Port: ptr.To(port), Protocol: ptr.To(proto)}},
	}
	for _, e := range eps {
		x := discoveryv1.Endpoint{Addresses: []string{e.addr}, Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}}
		if e.node != "" {
			x.NodeName = ptr.To(e.node)
		}
		es.Endpoints = append(es.Endpoints, x)
	}
	return es
}

func addrs(s lb.ServiceSpec) []string {
	var out []string
	for _, b := range s.Backends {
		out = append(out, b.String())
	}
	return out
}

var (
	yes = ptr.To(true)
	no  = ptr.To(false)
)

func TestDesiredPortsAndReadiness(t *testing.T) {
	s := svc("10.96.0.5",
		corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web")},
		corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
		corev1.ServicePort{Name: "sctp", Port: 9, Protocol: corev1.ProtocolSCTP},
	)
	eps := []*discoveryv1.EndpointSlice{
		slice(8080, "http", corev1.ProtocolTCP, ep{addr: "10.0.0.3", ready: yes}, ep{addr: "10.0.0.1"}, ep{addr: "10.0.0.2", ready: no}),
		slice(5353, "dns", corev1.ProtocolUDP, ep{addr: "10.0.0.1", ready: yes}),
	}
	got := Desired(s, eps, "n1")
	if len(got) != 2 {
		t.Fatalf("want 2 ports (SCTP skipped), got %v", got)
	}
	http := got[lb.ServiceKey{VIP: netip.MustParseAddr("10.96.0.5"), Port: 80, Proto: lb.TCP}]
	if a := addrs(http); !slices.Equal(a, []string{"10.0.0.1:8080", "10.0.0.3:8080"}) {
		t.Errorf("http backends %v: want ready (nil = ready) at the slice's port, sorted", a)
	}
	dns := got[lb.ServiceKey{VIP: netip.MustParseAddr("10.96.0.5"), Port: 53, Proto: lb.UDP}]
	if a := addrs(dns); !slices.Equal(a, []string{"10.0.0.1:5353"}) {
		t.Errorf("dns backends %v", a)
	}
}

func TestDesiredTerminatingFallback(t *testing.T) {
	s := svc("10.96.0.5", corev1.ServicePort{Name: "", Port: 80})
	term := ep{addr: "10.0.0.9", ready: no, serving: yes, terminating: yes}
	gone := ep{addr: "10.0.0.8", ready: no, serving: no, terminating: yes}
	got := Desired(s, []*discoveryv1.EndpointSlice{slice(80, "", corev1.ProtocolTCP, term, gone)}, "")
	for _, spec := range got {
		if a := addrs(spec); !slices.Equal(a, []string{"10.0.0.9:80"}) {
			t.Errorf("with nothing ready want the serving terminating endpoint, got %v", a)
		}
	}
	got = Desired(s, []*discoveryv1.EndpointSlice{slice(80, "", corev1.ProtocolTCP, term, ep{addr: "10.0.0.1", ready: yes})}, "")
	for _, spec := range got {
		if a := addrs(spec); !slices.Equal(a, []string{"10.0.0.1:80"}) {
			t.Errorf("with a ready endpoint terminating ones are not used, got %v", a)
		}
	}
}

func TestDesiredSkipsHeadlessAndExternalName(t *testing.T) {
	eps := []*discoveryv1.EndpointSlice{slice(80, "", corev1.ProtocolTCP, ep{addr: "10.0.0.1"})}
	if got := Desired(svc("None", corev1.ServicePort{Port: 80}), eps, ""); len(got) != 0 {
		t.Errorf("headless: %v", got)
	}
	ext := svc("", corev1.ServicePort{Port: 80})
	ext.Spec.Type = corev1.ServiceTypeExternalName
	if got := Desired(ext, eps, ""); len(got) != 0 {
		t.Errorf("ExternalName: %v", got)
	}
}

func TestDesiredAffinityAndLocalPolicy(t *testing.T) {
	s := svc("10.96.0.5", corev1.ServicePort{Port: 80})
	s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	eps := []*discoveryv1.EndpointSlice{slice(80, "", corev1.ProtocolTCP, ep{addr: "10.0.0.1", node: "n1"}, ep{addr: "10.0.0.2", node: "n2"})}
	for _, spec := range Desired(s, eps, "n1") {
		if spec.AffinityTimeout != 10800*time.Second || len(spec.Backends) != 2 {
			t.Errorf("default ClientIP affinity: %+v", spec)
		}
	}
	s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](30)}}
	s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	for _, spec := range Desired(s, eps, "n1") {
		if spec.AffinityTimeout != 30*time.Second {
			t.Errorf("affinity timeout %v, want 30s", spec.AffinityTimeout)
		}
		if a := addrs(spec); !slices.Equal(a, []string{"10.0.0.1:80"}) {
			t.Errorf("internalTrafficPolicy Local on n1: %v", a)
		}
	}
}

// kube-dns goes to the node's own DNS server on every port, whatever its endpoints say.
func TestLocalRoutesEveryPortToTheNode(t *testing.T) {
	s := svc("10.96.0.10", corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
		corev1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP}, corev1.ServicePort{Name: "sctp", Port: 53, Protocol: corev1.ProtocolSCTP})
	to := netip.MustParseAddrPort("10.88.0.1:53")
	got := Local(s, to)
	be := []lb.Backend{{Addr: to.Addr(), Port: 53}}
	vip := netip.MustParseAddr("10.96.0.10")
	if len(got) != 2 || !slices.Equal(got[lb.ServiceKey{VIP: vip, Port: 53, Proto: lb.UDP}].Backends, be) ||
		!slices.Equal(got[lb.ServiceKey{VIP: vip, Port: 53, Proto: lb.TCP}].Backends, be) {
		t.Fatalf("%+v", got)
	}
	if got := Local(s, netip.MustParseAddrPort("[fd00::1]:53")); len(got) != 0 {
		t.Fatalf("an IPv6 server for an IPv4 ClusterIP: %+v", got)
	}
}
