package kubelet

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/resolvconf"
)

func TestPodDNSPerPolicy(t *testing.T) {
	host := resolvconf.Config{Nameservers: []string{"192.0.2.53"}, Searches: []string{"corp.example"}, Options: []string{"edns0"}}
	cfg := DNSConfig{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"}
	clusterFirst := resolvconf.Config{Nameservers: []string{"10.96.0.10"},
		Searches: []string{"team.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}, Options: []string{"ndots:5"}}
	for _, c := range []struct {
		name string
		spec corev1.PodSpec
		cfg  DNSConfig
		want resolvconf.Config
	}{
		{"ClusterFirst", corev1.PodSpec{DNSPolicy: corev1.DNSClusterFirst}, cfg, clusterFirst},
		{"empty policy is ClusterFirst", corev1.PodSpec{}, cfg, clusterFirst},
		{"ClusterFirst with hostNetwork is Default", corev1.PodSpec{DNSPolicy: corev1.DNSClusterFirst, HostNetwork: true}, cfg, host},
		{"ClusterFirstWithHostNet", corev1.PodSpec{DNSPolicy: corev1.DNSClusterFirstWithHostNet, HostNetwork: true}, cfg, clusterFirst},
		{"Default", corev1.PodSpec{DNSPolicy: corev1.DNSDefault}, cfg, host},
		{"ClusterFirst without cluster DNS is Default", corev1.PodSpec{DNSPolicy: corev1.DNSClusterFirst}, DNSConfig{}, host},
		{"None", corev1.PodSpec{DNSPolicy: corev1.DNSNone, DNSConfig: &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"},
			Searches: []string{"a.example"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "rotate"}}}}, cfg,
			resolvconf.Config{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []string{"ndots:2", "rotate"}}},
		{"ClusterFirst merged with dnsConfig", corev1.PodSpec{DNSConfig: &corev1.PodDNSConfig{Nameservers: []string{"10.96.0.10", "1.1.1.1"},
			Searches: []string{"svc.cluster.local", "b.example"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("1")}, {Name: "edns0"}}}}, cfg,
			resolvconf.Config{Nameservers: []string{"10.96.0.10", "1.1.1.1"},
				Searches: append(clusterFirst.Searches, "b.example"), Options: []string{"ndots:1", "edns0"}}},
		{"custom domain", corev1.PodSpec{}, DNSConfig{ClusterDNS: []string{"10.0.0.10"}, ClusterDomain: "k.example."},
			resolvconf.Config{Nameservers: []string{"10.0.0.10"}, Searches: []string{"team.svc.k.example", "svc.k.example", "k.example", "corp.example"}, Options: []string{"ndots:5"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team"}, Spec: c.spec}
			if got := podDNS(pod, c.cfg, host); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// What the resolver would not read is cut: three nameservers, 32 searches, 2048 characters.
func TestPodDNSLimits(t *testing.T) {
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("d%d.example", i))
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "n"}, Spec: corev1.PodSpec{DNSPolicy: corev1.DNSNone,
		DNSConfig: &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "1.0.0.1", "8.8.8.8", "9.9.9.9"}, Searches: many}}}
	got := podDNS(pod, DNSConfig{}, resolvconf.Config{})
	if len(got.Nameservers) != 3 || len(got.Searches) != 32 || got.Searches[31] != "d31.example" {
		t.Fatalf("%+v", got)
	}
	long := strings.Repeat("x", 62) + ".example" // 72 with the prefix: 28 fit in 2048 with separators
	pod.Spec.DNSConfig.Searches = nil
	for i := range 32 {
		pod.Spec.DNSConfig.Searches = append(pod.Spec.DNSConfig.Searches, fmt.Sprintf("%02d%s", i, long))
	}
	got = podDNS(pod, DNSConfig{}, resolvconf.Config{})
	if n := len(strings.Join(got.Searches, " ")); len(got.Searches) != 28 || n > 2048 {
		t.Fatalf("%d searches, %d characters", len(got.Searches), n)
	}
}
