package proxy

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/skiff-sh/skiff/bpf/lb"
	"github.com/skiff-sh/skiff/bpf/nodeport"
)

// TestExternalEntries: a NodePort Service is served on each node address (tc and socket LB)
// and on localhost (socket LB only); a LoadBalancer at its port on the ingress addresses that
// are this node's; Local keeps this node's endpoints, marked local; ClusterIP gets nothing.
func TestExternalEntries(t *testing.T) {
	nodeIP := netip.MustParseAddr("10.9.0.2")
	s := svc("10.96.0.7", corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080})
	eps := []*discoveryv1.EndpointSlice{slice(8080, "http", corev1.ProtocolTCP, ep{addr: "10.1.0.5", node: "a"}, ep{addr: "10.1.1.5", node: "b"})}

	sock, tc := External(s, eps, "a", []netip.Addr{nodeIP})
	if len(sock) != 0 || len(tc) != 0 {
		t.Fatalf("ClusterIP Service: %v %v", sock, tc)
	}
	s.Spec.Type = corev1.ServiceTypeNodePort
	sock, tc = External(s, eps, "a", []netip.Addr{nodeIP})
	at := nodeport.Key{Addr: nodeIP, Port: 30080, Proto: lb.TCP}
	want := []nodeport.Backend{{Addr: netip.MustParseAddr("10.1.0.5"), Port: 8080, Local: true}, {Addr: netip.MustParseAddr("10.1.1.5"), Port: 8080}}
	if len(tc) != 1 || !slices.Equal(tc[at], want) {
		t.Fatalf("tc entries %v, want %v: %v", tc, at, want)
	}
	for _, ip := range []netip.Addr{nodeIP, Loopback} {
		if got := sock[lb.ServiceKey{VIP: ip, Port: 30080, Proto: lb.TCP}]; len(got.Backends) != 2 {
			t.Fatalf("socket LB at %s:30080: %v", ip, got)
		}
	}

	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	s.Spec.Type = corev1.ServiceTypeLoadBalancer
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: nodeIP.String()}, {IP: "10.9.0.3"}}
	_, tc = External(s, eps, "a", []netip.Addr{nodeIP})
	lbAt := nodeport.Key{Addr: nodeIP, Port: 80, Proto: lb.TCP}
	if len(tc) != 2 || !slices.Equal(tc[at], want[:1]) || !slices.Equal(tc[lbAt], want[:1]) {
		t.Fatalf("Local LoadBalancer: %v, want %v and %v with %v only", tc, at, lbAt, want[0])
	}
}

// TestHostPortEntries: each hostPort of a running pod goes to its IP and containerPort on every
// node address (or its hostIP), marked local; a pod without an IP or finished has none.
func TestHostPortEntries(t *testing.T) {
	nodeIP := netip.MustParseAddr("10.9.0.2")
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{
		{ContainerPort: 8080, HostPort: 18080, Protocol: corev1.ProtocolTCP},
		{ContainerPort: 53, HostPort: 1053, Protocol: corev1.ProtocolUDP, HostIP: "10.9.0.3"},
		{ContainerPort: 9090},
	}}}}}
	if sock, tc := HostPorts(pod, []netip.Addr{nodeIP}); len(sock) != 0 || len(tc) != 0 {
		t.Fatalf("pod without an IP: %v %v", sock, tc)
	}
	pod.Status.PodIP = "10.1.0.5"
	sock, tc := HostPorts(pod, []netip.Addr{nodeIP})
	podIP := netip.MustParseAddr("10.1.0.5")
	want := map[nodeport.Key][]nodeport.Backend{
		{Addr: nodeIP, Port: 18080, Proto: lb.TCP}:                         {{Addr: podIP, Port: 8080, Local: true}},
		{Addr: netip.MustParseAddr("10.9.0.3"), Port: 1053, Proto: lb.UDP}: {{Addr: podIP, Port: 53, Local: true}},
	}
	if len(tc) != len(want) || len(sock) != len(want) {
		t.Fatalf("entries %v %v, want %v", sock, tc, want)
	}
	for k, w := range want {
		if !slices.Equal(tc[k], w) || len(sock[lb.ServiceKey{VIP: k.Addr, Port: k.Port, Proto: k.Proto}].Backends) != 1 {
			t.Fatalf("%v: %v / %v, want %v", k, tc[k], sock, w)
		}
	}
	pod.Status.Phase = corev1.PodSucceeded
	if sock, tc := HostPorts(pod, []netip.Addr{nodeIP}); len(sock) != 0 || len(tc) != 0 {
		t.Fatalf("finished pod: %v %v", sock, tc)
	}
}
