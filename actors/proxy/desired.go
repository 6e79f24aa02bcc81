package proxy

import (
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/skiff-sh/skiff/bpf/lb"
)

// Desired is what the dataplane must hold for one Service, given the
// EndpointSlices labelled with its name: one entry per ClusterIP and port.
// node is this proxy's node, for internalTrafficPolicy: Local. Backend sets
// come out sorted and without duplicates, as Dump reports them.
func Desired(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, node string) map[lb.ServiceKey]lb.ServiceSpec {
	out := map[lb.ServiceKey]lb.ServiceSpec{}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return out
	}
	var aff time.Duration
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		secs := int32(corev1.DefaultClientIPServiceAffinitySeconds)
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			secs = *c.ClientIP.TimeoutSeconds
		}
		aff = time.Duration(secs) * time.Second
	}
	localOnly := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	for _, ip := range clusterIPs(svc) {
		family := discoveryv1.AddressTypeIPv4
		if ip.Is6() {
			family = discoveryv1.AddressTypeIPv6
		}
		for _, sp := range svc.Spec.Ports {
			proto, ok := protoOf(sp.Protocol)
			if !ok || sp.Port <= 0 || sp.Port > 65535 {
				continue
			}
			bes := backends(sp, eps, family, localOnly, node)
			out[lb.ServiceKey{VIP: ip, Port: uint16(sp.Port), Proto: proto}] = lb.ServiceSpec{Backends: bes, AffinityTimeout: aff}
		}
	}
	return out
}

// KubeDNS is the Service (namespace/name) a node routes to its own DNS server.
const KubeDNS = "kube-system/kube-dns"

// Local is what the dataplane holds for a Service this node serves itself (kube-dns, served by
// the node's actors/clusterdns): every ClusterIP of to's family and every port go to to,
// whatever the Service's endpoints, so a pod's lookups never leave its node.
func Local(svc *corev1.Service, to netip.AddrPort) map[lb.ServiceKey]lb.ServiceSpec {
	out := map[lb.ServiceKey]lb.ServiceSpec{}
	for _, ip := range clusterIPs(svc) {
		if ip.Is4() != to.Addr().Is4() {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			if proto, ok := protoOf(sp.Protocol); ok && sp.Port > 0 && sp.Port <= 65535 {
				out[lb.ServiceKey{VIP: ip, Port: uint16(sp.Port), Proto: proto}] = lb.ServiceSpec{Backends: []lb.Backend{{Addr: to.Addr(), Port: to.Port()}}}
			}
		}
	}
	return out
}

// clusterIPs are the Service's virtual IPs; headless Services have none.
func clusterIPs(svc *corev1.Service) []netip.Addr {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	var out []netip.Addr
	for _, s := range ips {
		if s == corev1.ClusterIPNone {
			return nil
		}
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

func protoOf(p corev1.Protocol) (lb.Proto, bool) {
	switch p {
	case corev1.ProtocolTCP, "":
		return lb.TCP, true
	case corev1.ProtocolUDP:
		return lb.UDP, true
	}
	return 0, false // SCTP is not load balanced at the socket layer
}

// backends picks the endpoints of one Service port: the ready ones, or, when
// none is ready, the serving and terminating ones (kube-proxy's fallback, so
// a rollout's last old pods keep serving until the new ones are ready).
func backends(sp corev1.ServicePort, eps []*discoveryv1.EndpointSlice, family discoveryv1.AddressType, localOnly bool, node string) []lb.Backend {
	var ready, terminating []lb.Backend
	for _, es := range eps {
		if es.AddressType != family {
			continue
		}
		port, ok := slicePort(es, sp)
		if !ok {
			continue
		}
		for _, ep := range es.Endpoints {
			if len(ep.Addresses) == 0 {
				continue
			}
			if localOnly && (ep.NodeName == nil || *ep.NodeName != node) {
				continue
			}
			// Only the first address is used: the others are the same endpoint.
			a, err := netip.ParseAddr(ep.Addresses[0])
			if err != nil {
				continue
			}
			b := lb.Backend{Addr: a.Unmap(), Port: port}
			c := ep.Conditions
			isReady := c.Ready == nil || *c.Ready // unknown means ready
			serving := isReady
			if c.Serving != nil {
				serving = *c.Serving
			}
			switch {
			case isReady:
				ready = append(ready, b)
			case serving && c.Terminating != nil && *c.Terminating:
				terminating = append(terminating, b)
			}
		}
	}
	if len(ready) == 0 {
		ready = terminating
	}
	slices.SortFunc(ready, func(a, b lb.Backend) int {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	})
	return slices.Compact(ready)
}

// slicePort resolves the Service port in a slice: matched by name and
// protocol, as the EndpointSlice controller writes them.
func slicePort(es *discoveryv1.EndpointSlice, sp corev1.ServicePort) (uint16, bool) {
	want := sp.Protocol
	if want == "" {
		want = corev1.ProtocolTCP
	}
	for _, p := range es.Ports {
		name, proto := "", corev1.ProtocolTCP
		if p.Name != nil {
			name = *p.Name
		}
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if name == sp.Name && proto == want && p.Port != nil && *p.Port > 0 && *p.Port <= 65535 {
			return uint16(*p.Port), true
		}
	}
	return 0, false
}

// sameSpec compares a desired spec with what Dump read from the kernel.
func sameSpec(want lb.ServiceSpec, have lb.ServiceDump) bool {
	return slices.Equal(want.Backends, have.Backends) &&
		want.AffinityTimeout.Round(time.Second) == have.AffinityTimeout
}
