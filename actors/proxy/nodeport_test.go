package proxy

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodePortForLocalClients: a process on the node reaches a NodePort Service at
// <node address>:<nodePort> and localhost:<nodePort> through the socket LB. The node address
// here is on no interface, so the tc programs cannot be attached: the proxy says so and still
// serves everything else.
func TestNodePortForLocalClients(t *testing.T) {
	e := newEnv(t)
	nodeIP := netip.MustParseAddr("192.0.2.1") // TEST-NET-1: on no interface
	e.nodeIPs = []netip.Addr{nodeIP}
	ips := []string{"127.0.0.2", "127.0.0.3"}
	e.client.must(request{Op: "serve", Addrs: ips, Port: backendPort})
	p := e.startProxy(false).p
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "np"}, Spec: corev1.ServiceSpec{
		Type:  corev1.ServiceTypeNodePort,
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080}},
	}}
	out, err := e.cp.Client.Create(e.ctx(), s)
	if err != nil {
		t.Fatal(err)
	}
	vip := netip.MustParseAddr(out.(*corev1.Service).Spec.ClusterIP)
	e.createSlice("np", endpoints{ips[0]: true, ips[1]: true})
	waitBackends(t, p, tcpKey(vip), ips...)
	for _, at := range []netip.Addr{nodeIP, Loopback} {
		got := e.client.must(request{Op: "tcpn", Addr: netip.AddrPortFrom(at, 30080).String(), N: 50}).Counts
		if got[ips[0]]+got[ips[1]] != 50 {
			t.Fatalf("50 connections to %s:30080 reached %v", at, got)
		}
	}
}
