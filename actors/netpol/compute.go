package netpol

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/skiff-sh/skiff/bpf/policy"
)

// Peers is what computing a pod's rules reads: the policies of its namespace and the pods
// and namespaces their peers select.
type Peers interface {
	Policies(namespace string) []*networkingv1.NetworkPolicy
	PodsIn(namespace string) []*corev1.Pod
	PodsLabelled(namespace, key, value string) []*corev1.Pod // pods with that label (an index)
	Namespaces() []*corev1.Namespace                         // every namespace (namespaceSelector)
}

// Desired is one local pod's entries in the policy maps.
type Desired struct {
	Endpoint policy.Endpoint
	Rules    map[policy.RuleKey][]policy.PortRange
}

// grant is one rule's allowance toward one peer: a prefix minus excepts, on ports (nil: all).
type grant struct {
	prefix netip.Prefix
	except []netip.Prefix
	ports  []policy.PortRange
}

var allPorts = []policy.PortRange{{Proto: policy.ProtoAny}}

// Compute derives a pod's isolation and allowed peers from the policies selecting it, as
// Kubernetes defines them: a pod selected by a policy of a type is isolated in that
// direction, and allowed what any of those policies' rules allow (their union).
func Compute(pod *corev1.Pod, ip netip.Addr, src Peers) (Desired, error) {
	d := Desired{Rules: map[policy.RuleKey][]policy.PortRange{}}
	var in, out []grant
	for _, np := range src.Policies(pod.Namespace) {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		for _, t := range np.Spec.PolicyTypes {
			switch t {
			case networkingv1.PolicyTypeIngress:
				d.Endpoint.Ingress = true
				for _, r := range np.Spec.Ingress {
					in = append(in, ruleGrants(np.Namespace, r.Ports, r.From, pod, true, src)...)
				}
			case networkingv1.PolicyTypeEgress:
				d.Endpoint.Egress = true
				for _, r := range np.Spec.Egress {
					out = append(out, ruleGrants(np.Namespace, r.Ports, r.To, pod, false, src)...)
				}
			}
		}
	}
	var errs []error
	for dir, gs := range map[policy.Direction][]grant{policy.Ingress: in, policy.Egress: out} {
		for prefix, ports := range flatten(gs) {
			if len(ports) > policy.MaxPorts {
				// Fail closed: the prefix gets no ports rather than a wrong subset.
				errs = append(errs, fmt.Errorf("%s toward %s: %d port ranges, at most %d", dir, prefix, len(ports), policy.MaxPorts))
				ports = nil
			}
			d.Rules[policy.RuleKey{Pod: ip, Dir: dir, Peer: prefix}] = ports
		}
	}
	if len(errs) > 0 {
		return d, fmt.Errorf("pod %s/%s: %v", pod.Namespace, pod.Name, errs)
	}
	return d, nil
}

// ruleGrants is one rule's grants. Named ports resolve against the pod the traffic goes to:
// the local pod for ingress, each peer pod for egress (an ipBlock peer has none to name).
func ruleGrants(ns string, ports []networkingv1.NetworkPolicyPort, peers []networkingv1.NetworkPolicyPeer, local *corev1.Pod, ingress bool, src Peers) []grant {
	numeric, named := splitPorts(ports)
	portsFor := func(target *corev1.Pod) []policy.PortRange {
		if len(ports) == 0 {
			return allPorts
		}
		out := slices.Clone(numeric)
		if target != nil {
			out = append(out, resolveNamed(named, target)...)
		}
		return out
	}
	var fixed []policy.PortRange // the ports of grants that do not depend on the peer
	if ingress {
		fixed = portsFor(local)
	} else {
		fixed = portsFor(nil)
	}
	if len(peers) == 0 {
		return []grant{{prefix: netip.MustParsePrefix("0.0.0.0/0"), ports: fixed}}
	}
	var out []grant
	for _, peer := range peers {
		if b := peer.IPBlock; b != nil {
			g, ok := ipBlockGrant(b, fixed)
			if ok {
				out = append(out, g)
			}
			continue
		}
		for _, p := range selectedPods(ns, peer, src) {
			ip, ok := podIPv4(p)
			if !ok {
				continue
			}
			pp := fixed
			if !ingress {
				pp = portsFor(p)
			}
			out = append(out, grant{prefix: netip.PrefixFrom(ip, 32), ports: pp})
		}
	}
	return out
}

// ipBlockGrant is an IPv4 block's grant; pods have IPv4 addresses only, so an IPv6 block
// matches no traffic they can send or receive.
func ipBlockGrant(b *networkingv1.IPBlock, ports []policy.PortRange) (grant, bool) {
	p, err := netip.ParsePrefix(b.CIDR)
	if err != nil || !p.Addr().Is4() {
		return grant{}, false
	}
	g := grant{prefix: p.Masked(), ports: ports}
	for _, e := range b.Except {
		if x, err := netip.ParsePrefix(e); err == nil && x.Addr().Is4() {
			g.except = append(g.except, x.Masked())
		}
	}
	return g, true
}

// selectedPods are the pods a selector peer names: podSelector in the policy's namespace,
// namespaceSelector's namespaces (all pods, or those podSelector also matches).
func selectedPods(ns string, peer networkingv1.NetworkPolicyPeer, src Peers) []*corev1.Pod {
	podSel := labels.Everything()
	if peer.PodSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
		if err != nil {
			return nil
		}
		podSel = s
	}
	namespaces := []string{ns}
	if peer.NamespaceSelector != nil {
		nsSel, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
		if err != nil {
			return nil
		}
		namespaces = namespaces[:0]
		for _, n := range src.Namespaces() {
			if nsSel.Matches(labels.Set(n.Labels)) {
				namespaces = append(namespaces, n.Name)
			}
		}
	}
	// A selector with matchLabels starts from the pods carrying one of them (an index),
	// not from the whole namespace.
	var key, value string
	if peer.PodSelector != nil && len(peer.PodSelector.MatchLabels) > 0 {
		key = slices.Min(slices.Collect(maps.Keys(peer.PodSelector.MatchLabels)))
		value = peer.PodSelector.MatchLabels[key]
	}
	var out []*corev1.Pod
	for _, n := range namespaces {
		candidates := src.PodsIn
		if key != "" {
			candidates = func(ns string) []*corev1.Pod { return src.PodsLabelled(ns, key, value) }
		}
		for _, p := range candidates(n) {
			if podSel.Matches(labels.Set(p.Labels)) {
				out = append(out, p)
			}
		}
	}
	return out
}

// podIPv4 is a pod's IPv4 address while it may have traffic: not a host-network pod (its
// address is the node's), not finished.
func podIPv4(p *corev1.Pod) (netip.Addr, bool) {
	if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil && p.Status.PodIP == "" {
		return netip.Addr{}, false
	}
	for _, s := range append([]string{p.Status.PodIP}, podIPs(p)...) {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func podIPs(p *corev1.Pod) []string {
	out := make([]string, len(p.Status.PodIPs))
	for i, ip := range p.Status.PodIPs {
		out[i] = ip.IP
	}
	return out
}

type namedPort struct {
	name  string
	proto uint8
}

func protoOf(p *corev1.Protocol) uint8 {
	if p == nil {
		return policy.ProtoTCP
	}
	switch *p {
	case corev1.ProtocolUDP:
		return policy.ProtoUDP
	case corev1.ProtocolSCTP:
		return policy.ProtoSCTP
	}
	return policy.ProtoTCP
}

func splitPorts(ports []networkingv1.NetworkPolicyPort) (numeric []policy.PortRange, named []namedPort) {
	for _, p := range ports {
		proto := protoOf(p.Protocol)
		switch {
		case p.Port == nil:
			numeric = append(numeric, policy.PortRange{Proto: proto, Lo: 0, Hi: 65535})
		case p.Port.StrVal != "":
			named = append(named, namedPort{p.Port.StrVal, proto})
		default:
			hi := p.Port.IntVal
			if p.EndPort != nil {
				hi = *p.EndPort
			}
			numeric = append(numeric, policy.PortRange{Proto: proto, Lo: uint16(p.Port.IntVal), Hi: uint16(hi)})
		}
	}
	return numeric, named
}

// resolveNamed maps port names to the target pod's container ports of the same protocol.
func resolveNamed(named []namedPort, target *corev1.Pod) []policy.PortRange {
	var out []policy.PortRange
	for _, n := range named {
		for _, c := range target.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == n.name && protoOf(&cp.Protocol) == n.proto {
					out = append(out, policy.PortRange{Proto: n.proto, Lo: uint16(cp.ContainerPort), Hi: uint16(cp.ContainerPort)})
				}
			}
		}
	}
	return out
}
