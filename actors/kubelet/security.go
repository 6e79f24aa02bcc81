package kubelet

import (
	corev1 "k8s.io/api/core/v1"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
)

// security is a container's effective security context: its own fields over the pod's, as
// Kubernetes' kubelet merges them. Admission refuses what is not applied here.
func security(pod *corev1.Pod, c *corev1.Container) kruntime.Security {
	var s kruntime.Security
	if p := pod.Spec.SecurityContext; p != nil {
		s.RunAsUser, s.RunAsGroup = p.RunAsUser, p.RunAsGroup
		s.RunAsNonRoot = p.RunAsNonRoot != nil && *p.RunAsNonRoot
		s.SupplementalGroups = p.SupplementalGroups
	}
	sc := c.SecurityContext
	if sc == nil {
		return s
	}
	if sc.RunAsUser != nil {
		s.RunAsUser = sc.RunAsUser
	}
	if sc.RunAsGroup != nil {
		s.RunAsGroup = sc.RunAsGroup
	}
	if sc.RunAsNonRoot != nil {
		s.RunAsNonRoot = *sc.RunAsNonRoot
	}
	s.ReadOnlyRootFS = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
	s.NoNewPrivileges = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
	if caps := sc.Capabilities; caps != nil {
		for _, c := range caps.Add {
			s.CapAdd = append(s.CapAdd, string(c))
		}
		for _, c := range caps.Drop {
			s.CapDrop = append(s.CapDrop, string(c))
		}
	}
	return s
}
