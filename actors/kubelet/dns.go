package kubelet

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/resolvconf"
)

// The resolver limits Kubernetes' kubelet applies to a pod's resolv.conf (glibc's: three
// nameservers; 32 search domains of at most 2048 characters in all).
const (
	maxNameservers  = 3
	maxSearches     = 32
	maxSearchChars  = 2048
	clusterDNSNdots = "ndots:5"
)

// DNSConfig is what the kubelet needs to write pods' resolv.conf.
type DNSConfig struct {
	ClusterDNS    []string // the kube-dns Service's ClusterIP(s); empty: ClusterFirst falls back to Default
	ClusterDomain string   // default cluster.local
	ResolvConf    string   // the node's resolver file (Default policy, host search path); default /etc/resolv.conf
}

// podDNS is the resolv.conf of a pod per its dnsPolicy and dnsConfig, as Kubernetes' kubelet
// writes it:
//   - ClusterFirst (a pod network) and ClusterFirstWithHostNet: the cluster DNS, searching
//     <ns>.svc.<domain>, svc.<domain>, <domain>, then the node's search path; ndots:5;
//   - Default, and ClusterFirst with hostNetwork: the node's resolv.conf;
//   - None: nothing but the pod's dnsConfig.
//
// dnsConfig is then merged in: nameservers and searches appended without duplicates, options
// overriding those of the same name; the result is cut to the resolver's limits.
func podDNS(pod *corev1.Pod, cfg DNSConfig, host resolvconf.Config) resolvconf.Config {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	cluster := policy == corev1.DNSClusterFirstWithHostNet || (policy == corev1.DNSClusterFirst && !pod.Spec.HostNetwork)
	if cluster && len(cfg.ClusterDNS) == 0 {
		cluster, policy = false, corev1.DNSDefault // kubelet's fallback when no cluster DNS is configured
	}
	var out resolvconf.Config
	switch {
	case cluster:
		domain := strings.TrimSuffix(cfg.ClusterDomain, ".")
		if domain == "" {
			domain = "cluster.local"
		}
		out.Nameservers = slices.Clone(cfg.ClusterDNS)
		out.Searches = append([]string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}, host.Searches...)
		out.Options = []string{clusterDNSNdots}
	case policy != corev1.DNSNone:
		out = resolvconf.Config{Nameservers: slices.Clone(host.Nameservers), Searches: slices.Clone(host.Searches), Options: slices.Clone(host.Options)}
	}
	if d := pod.Spec.DNSConfig; d != nil {
		out.Nameservers = appendNew(out.Nameservers, d.Nameservers...)
		out.Searches = appendNew(out.Searches, d.Searches...)
		out.Options = mergeOptions(out.Options, d.Options)
	}
	out.Nameservers = out.Nameservers[:min(len(out.Nameservers), maxNameservers)]
	out.Searches = trimSearches(out.Searches)
	return out
}

func appendNew(list []string, more ...string) []string {
	for _, s := range more {
		if !slices.Contains(list, s) {
			list = append(list, s)
		}
	}
	return list
}

// mergeOptions overrides options of the same name ("ndots:5" is named ndots) with the pod's.
func mergeOptions(base []string, pod []corev1.PodDNSConfigOption) []string {
	name := func(o string) string { n, _, _ := strings.Cut(o, ":"); return n }
	for _, o := range pod {
		v := o.Name
		if o.Value != nil {
			v += ":" + *o.Value
		}
		if i := slices.IndexFunc(base, func(b string) bool { return name(b) == o.Name }); i >= 0 {
			base[i] = v
		} else {
			base = append(base, v)
		}
	}
	return base
}

// trimSearches keeps the search domains the resolver reads: at most maxSearches, at most
// maxSearchChars in all (separators counted).
func trimSearches(s []string) []string {
	s = s[:min(len(s), maxSearches)]
	n := 0
	for i, d := range s {
		if n += len(d) + 1; n-1 > maxSearchChars {
			return s[:i]
		}
	}
	return s
}

// podDNS reads the node's resolver file afresh (it may change under a running node) and
// computes the pod's resolv.conf.
func (k *kubelet) podDNS(pod *corev1.Pod) resolvconf.Config {
	host, err := resolvconf.Host(k.cfg.DNS.ResolvConf)
	if err != nil {
		k.cfg.Logger.Warn("reading the node's resolv.conf", "file", k.cfg.DNS.ResolvConf, "err", err)
	}
	return podDNS(pod, k.cfg.DNS, host)
}
