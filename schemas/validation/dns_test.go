package validation_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// dnsPolicy and dnsConfig are refused as Kubernetes refuses them, naming the field.
func TestPodDNSConfig(t *testing.T) {
	pod := func(policy corev1.DNSPolicy, d *corev1.PodDNSConfig) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: meta("p"), Spec: podSpec()}
		p.Spec.DNSPolicy, p.Spec.DNSConfig = policy, d
		return p
	}
	var searches []string
	for i := range 33 {
		searches = append(searches, fmt.Sprintf("s%d.example", i))
	}
	for _, c := range []struct {
		name       string
		pod        *corev1.Pod
		path, want string
	}{
		{"ClusterFirst", pod(corev1.DNSClusterFirst, nil), "", ""},
		{"None with config", pod(corev1.DNSNone, &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example."},
			Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("2")}}}), "", ""},
		{"unknown policy", pod("Cluster", nil), "spec.dnsPolicy", "Unsupported value"},
		{"None without dnsConfig", pod(corev1.DNSNone, nil), "spec.dnsConfig", "must provide `dnsConfig` when `dnsPolicy` is None"},
		{"None without nameservers", pod(corev1.DNSNone, &corev1.PodDNSConfig{Searches: []string{"a.example"}}),
			"spec.dnsConfig.nameservers", "must provide at least one DNS nameserver when `dnsPolicy` is None"},
		{"four nameservers", pod(corev1.DNSDefault, &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "1.0.0.1", "8.8.8.8", "9.9.9.9"}}),
			"spec.dnsConfig.nameservers", "must not have more than 3 nameservers"},
		{"nameserver not an IP", pod(corev1.DNSClusterFirst, &corev1.PodDNSConfig{Nameservers: []string{"dns.example"}}),
			"spec.dnsConfig.nameservers[0]", "must be valid IP address"},
		{"33 searches", pod(corev1.DNSClusterFirst, &corev1.PodDNSConfig{Searches: searches}),
			"spec.dnsConfig.searches", "must not have more than 32 search paths"},
		{"search list too long", pod(corev1.DNSClusterFirst, &corev1.PodDNSConfig{Searches: []string{strings.Repeat("a.", 1100) + "example"}}),
			"spec.dnsConfig.searches", "must not have more than 2048 characters"},
		{"bad search", pod(corev1.DNSClusterFirst, &corev1.PodDNSConfig{Searches: []string{"Not_A.Domain"}}),
			"spec.dnsConfig.searches[0]", "RFC 1123 subdomain"},
		{"unnamed option", pod(corev1.DNSClusterFirst, &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Value: ptr("1")}}}),
			"spec.dnsConfig.options[0]", "must not be empty"},
	} {
		check(t, c.name, c.pod, c.path, c.want)
	}
}
