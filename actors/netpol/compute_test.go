package netpol

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-sh/skiff/bpf/policy"
	"github.com/skiff-sh/skiff/schemas/defaults"
)

type fakePeers struct {
	pols []*networkingv1.NetworkPolicy
	pods []*corev1.Pod
	nss  []*corev1.Namespace
}

func (f fakePeers) Policies(ns string) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, p := range f.pols {
		if p.Namespace == ns {
			out = append(out, p)
		}
	}
	return out
}

func (f fakePeers) PodsIn(ns string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range f.pods {
		if p.Namespace == ns {
			out = append(out, p)
		}
	}
	return out
}

func (f fakePeers) Namespaces() []*corev1.Namespace { return f.nss }

func (f fakePeers) PodsLabelled(ns, k, v string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range f.PodsIn(ns) {
		if l, ok := p.Labels[k]; ok && l == v {
			out = append(out, p)
		}
	}
	return out
}

func pod(ns, name, ip string, labels map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: ports}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip}}
}

func np(ns, name string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	defaults.Default(p)
	return p
}

func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func key(dir policy.Direction, pod, peer string) policy.RuleKey {
	return policy.RuleKey{Pod: netip.MustParseAddr(pod), Dir: dir, Peer: netip.MustParsePrefix(peer)}
}

func tcp(lo, hi uint16) policy.PortRange {
	return policy.PortRange{Proto: policy.ProtoTCP, Lo: lo, Hi: hi}
}

func TestComputeSelectorsPortsAndExcepts(t *testing.T) {
	web := pod("prod", "web", "10.0.0.2", map[string]string{"app": "web"}, corev1.ContainerPort{Name: "http", ContainerPort: 8080})
	client := pod("prod", "client", "10.0.0.3", map[string]string{"role": "client"})
	other := pod("prod", "other", "10.0.0.4", map[string]string{"role": "other"})
	mon := pod("mon", "scraper", "10.0.1.5", nil)
	db := pod("prod", "db", "10.0.0.9", map[string]string{"app": "db"}, corev1.ContainerPort{Name: "sql", ContainerPort: 5432})
	http := intstr.FromString("http")
	sql := intstr.FromString("sql")
	p80, end := intstr.FromInt32(80), int32(90)
	src := fakePeers{
		pods: []*corev1.Pod{web, client, other, mon, db},
		nss: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "prod"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "mon", Labels: map[string]string{"team": "mon"}}}},
		pols: []*networkingv1.NetworkPolicy{
			np("prod", "web-in", networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "web"),
				Ingress: []networkingv1.NetworkPolicyIngressRule{
					{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("role", "client")}}, Ports: []networkingv1.NetworkPolicyPort{{Port: &http}}},
					{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("team", "mon")}}},
					{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/16", Except: []string{"192.168.1.0/24"}}}},
						Ports: []networkingv1.NetworkPolicyPort{{Port: &p80, EndPort: &end}}},
				}}),
			np("prod", "web-out", networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "web"),
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", "db")}},
					Ports: []networkingv1.NetworkPolicyPort{{Port: &sql}}}}}),
			np("prod", "unrelated", networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "db")}),
		},
	}
	d, err := Compute(web, netip.MustParseAddr("10.0.0.2"), src)
	if err != nil {
		t.Fatal(err)
	}
	if d.Endpoint != (policy.Endpoint{Ingress: true, Egress: true}) {
		t.Errorf("endpoint %+v", d.Endpoint)
	}
	want := map[policy.RuleKey][]policy.PortRange{
		key(policy.Ingress, "10.0.0.2", "10.0.0.3/32"):    {tcp(8080, 8080)}, // named port of web itself
		key(policy.Ingress, "10.0.0.2", "10.0.1.5/32"):    allPorts,          // every pod of a selected namespace
		key(policy.Ingress, "10.0.0.2", "192.168.0.0/16"): {tcp(80, 90)},
		key(policy.Ingress, "10.0.0.2", "192.168.1.0/24"): nil,               // the except: nothing
		key(policy.Egress, "10.0.0.2", "10.0.0.9/32"):     {tcp(5432, 5432)}, // named port of the peer
	}
	if !reflect.DeepEqual(d.Rules, want) {
		t.Errorf("rules:\n got %v\nwant %v", d.Rules, want)
	}

	// A pod no policy selects is not isolated and has no rules.
	d, _ = Compute(other, netip.MustParseAddr("10.0.0.4"), src)
	if d.Endpoint != (policy.Endpoint{}) || len(d.Rules) != 0 {
		t.Errorf("unselected pod: %+v", d)
	}
	// An empty policy (default deny ingress) isolates with no rules.
	d, _ = Compute(db, netip.MustParseAddr("10.0.0.9"), src)
	if d.Endpoint != (policy.Endpoint{Ingress: true}) || len(d.Rules) != 0 {
		t.Errorf("default deny: %+v", d)
	}
}

func TestFlattenUnionsOverlaps(t *testing.T) {
	gs := []grant{
		{prefix: netip.MustParsePrefix("10.0.0.0/8"), except: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, ports: []policy.PortRange{tcp(80, 80)}},
		{prefix: netip.MustParsePrefix("10.1.2.0/24"), ports: []policy.PortRange{tcp(443, 443)}},
		{prefix: netip.MustParsePrefix("10.1.2.3/32"), ports: []policy.PortRange{tcp(81, 90), tcp(85, 100)}},
		{prefix: netip.MustParsePrefix("10.9.9.9/32"), ports: []policy.PortRange{{Proto: policy.ProtoUDP, Lo: 53, Hi: 53}}},
	}
	got := flatten(gs)
	want := map[netip.Prefix][]policy.PortRange{
		netip.MustParsePrefix("10.0.0.0/8"):  {tcp(80, 80)},
		netip.MustParsePrefix("10.1.0.0/16"): nil,
		netip.MustParsePrefix("10.1.2.0/24"): {tcp(443, 443)},
		netip.MustParsePrefix("10.1.2.3/32"): {tcp(81, 100), tcp(443, 443)},
		netip.MustParsePrefix("10.9.9.9/32"): {tcp(80, 80), {Proto: policy.ProtoUDP, Lo: 53, Hi: 53}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("flatten:\n got %v\nwant %v", got, want)
	}
}
