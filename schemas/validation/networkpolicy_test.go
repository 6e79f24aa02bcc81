package validation_test

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-sh/skiff/schemas/defaults"
)

func netpol() *networkingv1.NetworkPolicy {
	port := intstr.FromInt32(8080)
	return &networkingv1.NetworkPolicy{ObjectMeta: meta("allow-web"), Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
			From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}},
			},
		}},
	}}
}

func TestNetworkPolicyRules(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	ing := func(n *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicyIngressRule { return &n.Spec.Ingress[0] }
	cases := []struct {
		name, path, want string
		mut              func(*networkingv1.NetworkPolicy)
	}{
		{"valid", "", "", func(*networkingv1.NetworkPolicy) {}},
		{"empty selects all, no rules", "", "", func(n *networkingv1.NetworkPolicy) { n.Spec = networkingv1.NetworkPolicySpec{} }},
		{"port range", "", "", func(n *networkingv1.NetworkPolicy) { ing(n).Ports[0].EndPort = i32(9000) }},
		{"bad selector", "spec.podSelector.matchLabels", "Invalid value", func(n *networkingv1.NetworkPolicy) {
			n.Spec.PodSelector.MatchLabels = map[string]string{"a b": "x"}
		}},
		{"bad protocol", "spec.ingress[0].ports[0].protocol", `Unsupported value: "ICMP"`, func(n *networkingv1.NetworkPolicy) {
			p := corev1.Protocol("ICMP")
			ing(n).Ports[0].Protocol = &p
		}},
		{"port out of range", "spec.ingress[0].ports[0].port", "between 1 and 65535", func(n *networkingv1.NetworkPolicy) {
			p := intstr.FromInt32(70000)
			ing(n).Ports[0].Port = &p
		}},
		{"endPort below port", "spec.ingress[0].ports[0].endPort", "must be greater than or equal to `port`", func(n *networkingv1.NetworkPolicy) {
			ing(n).Ports[0].EndPort = i32(80)
		}},
		{"endPort after a name", "spec.ingress[0].ports[0].endPort", "may not be specified when `port` is non-numeric", func(n *networkingv1.NetworkPolicy) {
			p := intstr.FromString("http")
			ing(n).Ports[0].Port, ing(n).Ports[0].EndPort = &p, i32(90)
		}},
		{"endPort alone", "spec.ingress[0].ports[0].endPort", "may not be specified when `port` is not specified", func(n *networkingv1.NetworkPolicy) {
			ing(n).Ports[0].Port, ing(n).Ports[0].EndPort = nil, i32(90)
		}},
		{"bad port name", "spec.ingress[0].ports[0].port", "Invalid value", func(n *networkingv1.NetworkPolicy) {
			p := intstr.FromString("no_such--name")
			ing(n).Ports[0].Port = &p
		}},
		{"empty peer", "spec.ingress[0].from[0]", "must specify a peer", func(n *networkingv1.NetworkPolicy) {
			ing(n).From[0] = networkingv1.NetworkPolicyPeer{}
		}},
		{"ipBlock with a selector", "spec.ingress[0].from[1]", "may not specify both ipBlock and another peer", func(n *networkingv1.NetworkPolicy) {
			ing(n).From[1].PodSelector = &metav1.LabelSelector{}
		}},
		{"no cidr", "spec.ingress[0].from[1].ipBlock.cidr", "Required value", func(n *networkingv1.NetworkPolicy) { ing(n).From[1].IPBlock.CIDR = "" }},
		{"bits past the prefix", "spec.ingress[0].from[1].ipBlock.cidr", "must not have bits set beyond the prefix length", func(n *networkingv1.NetworkPolicy) {
			ing(n).From[1].IPBlock.CIDR = "10.0.0.1/8"
		}},
		{"except outside", "spec.ingress[0].from[1].ipBlock.except[0]", "must be a strict subset of `cidr`", func(n *networkingv1.NetworkPolicy) {
			ing(n).From[1].IPBlock.Except = []string{"192.168.0.0/16"}
		}},
		{"except equal", "spec.ingress[0].from[1].ipBlock.except[0]", "must be a strict subset of `cidr`", func(n *networkingv1.NetworkPolicy) {
			ing(n).From[1].IPBlock.Except = []string{"10.0.0.0/8"}
		}},
		{"bad egress peer", "spec.egress[0].to[0].namespaceSelector.matchExpressions[0].operator", "not a valid selector operator", func(n *networkingv1.NetworkPolicy) {
			n.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}}}}}
		}},
		{"bad policy type", "spec.policyTypes[0]", `Unsupported value: "Both"`, func(n *networkingv1.NetworkPolicy) {
			n.Spec.PolicyTypes = []networkingv1.PolicyType{"Both"}
		}},
		{"three policy types", "spec.policyTypes", "may not specify more than two policyTypes", func(n *networkingv1.NetworkPolicy) {
			n.Spec.PolicyTypes = []networkingv1.PolicyType{"Ingress", "Egress", "Ingress"}
		}},
	}
	for _, c := range cases {
		n := netpol()
		c.mut(n)
		check(t, c.name, n, c.path, c.want)
	}
}

func TestNetworkPolicyDefaults(t *testing.T) {
	n := netpol()
	defaults.Default(n)
	if p := n.Spec.Ingress[0].Ports[0].Protocol; p == nil || *p != corev1.ProtocolTCP {
		t.Errorf("protocol: %v", p)
	}
	if want := []networkingv1.PolicyType{"Ingress"}; !reflect.DeepEqual(n.Spec.PolicyTypes, want) {
		t.Errorf("ingress only: policyTypes %v; want %v", n.Spec.PolicyTypes, want)
	}
	n = netpol()
	n.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
	defaults.Default(n)
	if want := []networkingv1.PolicyType{"Ingress", "Egress"}; !reflect.DeepEqual(n.Spec.PolicyTypes, want) {
		t.Errorf("with egress: policyTypes %v; want %v", n.Spec.PolicyTypes, want)
	}
	n = netpol()
	n.Spec.PolicyTypes = []networkingv1.PolicyType{"Egress"}
	defaults.Default(n)
	if want := []networkingv1.PolicyType{"Egress"}; !reflect.DeepEqual(n.Spec.PolicyTypes, want) {
		t.Errorf("set types kept: %v", n.Spec.PolicyTypes)
	}
}
