package defaults

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// defaultClientIPTimeout is the session affinity timeout Kubernetes uses (3 hours).
const defaultClientIPTimeout = 10800

// Service defaults type ClusterIP, no session affinity, TCP ports whose target is the port,
// traffic policies Cluster, and single-stack IP families derived from the assigned cluster IP.
func Service(s *corev1.Service) {
	sp := &s.Spec
	if sp.Type == "" {
		sp.Type = corev1.ServiceTypeClusterIP
	}
	if sp.SessionAffinity == "" {
		sp.SessionAffinity = corev1.ServiceAffinityNone
	}
	if sp.SessionAffinity == corev1.ServiceAffinityClientIP {
		if sp.SessionAffinityConfig == nil {
			sp.SessionAffinityConfig = &corev1.SessionAffinityConfig{}
		}
		if sp.SessionAffinityConfig.ClientIP == nil {
			sp.SessionAffinityConfig.ClientIP = &corev1.ClientIPConfig{}
		}
		if sp.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			sp.SessionAffinityConfig.ClientIP.TimeoutSeconds = ptr(int32(defaultClientIPTimeout))
		}
	}
	for i := range sp.Ports {
		p := &sp.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		p.TargetPort = targetPortOrPort(p.TargetPort, p.Port)
	}
	if sp.Type == corev1.ServiceTypeExternalName {
		return
	}
	if sp.InternalTrafficPolicy == nil {
		sp.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyCluster)
	}
	if (sp.Type == corev1.ServiceTypeNodePort || sp.Type == corev1.ServiceTypeLoadBalancer) && sp.ExternalTrafficPolicy == "" {
		sp.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if sp.Type == corev1.ServiceTypeLoadBalancer && sp.AllocateLoadBalancerNodePorts == nil {
		sp.AllocateLoadBalancerNodePorts = ptr(true)
	}
	if sp.ClusterIP != "" && len(sp.ClusterIPs) == 0 {
		sp.ClusterIPs = []string{sp.ClusterIP}
	}
	if sp.IPFamilyPolicy == nil {
		sp.IPFamilyPolicy = ptr(corev1.IPFamilyPolicySingleStack)
	}
	if len(sp.IPFamilies) == 0 {
		sp.IPFamilies = []corev1.IPFamily{familyOf(sp.ClusterIP)}
	}
}

// familyOf is IPv6 for an IPv6 address and IPv4 otherwise (including "", "None" and garbage,
// which validation reports on its own).
func familyOf(ip string) corev1.IPFamily {
	if a, err := netip.ParseAddr(ip); err == nil && a.Is6() && !a.Is4In6() {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}
