package proxy

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/skiff-sh/skiff/bpf/lb"
	"github.com/skiff-sh/skiff/bpf/nodeport"
)

// Loopback is where a node's own processes reach node ports too (localhost:nodePort).
var Loopback = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// External is what a Service needs on this node's own addresses: its node ports on each of
// nodeIPs, and its port on each LoadBalancer ingress address that is one of nodeIPs (the
// built-in LoadBalancer publishes the nodes' addresses). sock are the socket LB's entries,
// for clients on this node (plus localhost:nodePort); tc the tc programs', for traffic from
// outside. externalTrafficPolicy Local keeps only this node's endpoints, which then see the
// client's address; Cluster spreads over all of them.
func External(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, node string, nodeIPs []netip.Addr) (sock map[lb.ServiceKey]lb.ServiceSpec, tc map[nodeport.Key][]nodeport.Backend) {
	sock, tc = map[lb.ServiceKey]lb.ServiceSpec{}, map[nodeport.Key][]nodeport.Backend{}
	if len(nodeIPs) == 0 || (svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer) {
		return sock, tc
	}
	localOnly := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	local := localAddrs(eps, node)
	var ingress []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil && slices.Contains(nodeIPs, a.Unmap()) {
			ingress = append(ingress, a.Unmap())
		}
	}
	for _, sp := range svc.Spec.Ports {
		proto, ok := protoOf(sp.Protocol)
		if !ok {
			continue
		}
		bes := backends(sp, eps, discoveryv1.AddressTypeIPv4, localOnly, node)
		var at []netip.AddrPort
		if sp.NodePort > 0 && sp.NodePort <= 65535 {
			for _, ip := range append(slices.Clone(nodeIPs), Loopback) {
				at = append(at, netip.AddrPortFrom(ip, uint16(sp.NodePort)))
			}
		}
		if sp.Port > 0 && sp.Port <= 65535 {
			for _, ip := range ingress {
				at = append(at, netip.AddrPortFrom(ip, uint16(sp.Port)))
			}
		}
		for _, ap := range at {
			sock[lb.ServiceKey{VIP: ap.Addr(), Port: ap.Port(), Proto: proto}] = lb.ServiceSpec{Backends: bes}
			if ap.Addr() == Loopback {
				continue // never arrives from outside
			}
			tbs := make([]nodeport.Backend, 0, len(bes))
			for _, b := range bes {
				tbs = append(tbs, nodeport.Backend{Addr: b.Addr, Port: b.Port, Local: local[b.Addr]})
			}
			tc[nodeport.Key{Addr: ap.Addr(), Port: ap.Port(), Proto: proto}] = tbs
		}
	}
	return sock, tc
}

// localAddrs are the addresses of the endpoints on node.
func localAddrs(eps []*discoveryv1.EndpointSlice, node string) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for _, es := range eps {
		for _, ep := range es.Endpoints {
			if ep.NodeName == nil || *ep.NodeName != node {
				continue
			}
			for _, s := range ep.Addresses {
				if a, err := netip.ParseAddr(s); err == nil {
					out[a.Unmap()] = true
				}
			}
		}
	}
	return out
}
