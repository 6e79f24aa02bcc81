package validation

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// What Skiff's node does not do is refused where it is set, naming the field: a pod asking for
// the host's network or a seccomp profile must not run without it.
const (
	notByKubelet   = "not supported by Skiff's kubelet"
	notByScheduler = "not supported by Skiff's scheduler"
)

// unsupportedPodSpec refuses pod fields set to anything but what Skiff does anyway.
func unsupportedPodSpec(s *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	forbid := func(set bool, name, why string) {
		if set {
			errs = append(errs, field.Forbidden(p.Child(name), why))
		}
	}
	forbid(s.HostNetwork, "hostNetwork", notByKubelet+": every pod gets its own network namespace")
	forbid(s.HostPID, "hostPID", notByKubelet)
	forbid(s.HostIPC, "hostIPC", notByKubelet)
	forbid(s.ShareProcessNamespace != nil && *s.ShareProcessNamespace, "shareProcessNamespace", notByKubelet)
	forbid(s.HostUsers != nil && !*s.HostUsers, "hostUsers", notByKubelet+": user namespaces")
	forbid(s.RuntimeClassName != nil, "runtimeClassName", notByKubelet+": every container runs with runc")
	forbid(s.SetHostnameAsFQDN != nil && *s.SetHostnameAsFQDN, "setHostnameAsFQDN", notByKubelet)
	forbid(s.HostnameOverride != nil, "hostnameOverride", notByKubelet)
	forbid(s.ActiveDeadlineSeconds != nil, "activeDeadlineSeconds", notByKubelet)
	forbid(len(s.ReadinessGates) > 0, "readinessGates", notByKubelet)
	forbid(len(s.ResourceClaims) > 0, "resourceClaims", "dynamic resource allocation is "+notByKubelet)
	forbid(len(s.EphemeralContainers) > 0, "ephemeralContainers", notByKubelet)
	forbid(len(s.SchedulingGates) > 0, "schedulingGates", notByScheduler)
	if s.OS != nil && s.OS.Name != corev1.Linux {
		errs = append(errs, field.NotSupported(p.Child("os", "name"), s.OS.Name, []corev1.OSName{corev1.Linux}))
	}
	if sc := s.SecurityContext; sc != nil {
		sp := p.Child("securityContext")
		forbidSC := func(set bool, name string) {
			if set {
				errs = append(errs, field.Forbidden(sp.Child(name), notByKubelet))
			}
		}
		forbidSC(sc.FSGroup != nil, "fsGroup")
		forbidSC(sc.FSGroupChangePolicy != nil, "fsGroupChangePolicy")
		forbidSC(len(sc.Sysctls) > 0, "sysctls")
		forbidSC(sc.SELinuxOptions != nil, "seLinuxOptions")
		forbidSC(sc.SELinuxChangePolicy != nil, "seLinuxChangePolicy")
		forbidSC(sc.WindowsOptions != nil, "windowsOptions")
		if sc.SupplementalGroupsPolicy != nil {
			errs = append(errs, oneOf(*sc.SupplementalGroupsPolicy, sp.Child("supplementalGroupsPolicy"), corev1.SupplementalGroupsPolicyMerge)...)
		}
		errs = append(errs, profiles(sc.SeccompProfile, sc.AppArmorProfile, sp)...)
		errs = append(errs, ids(sc.RunAsUser, sc.RunAsGroup, sp)...)
		for i, g := range sc.SupplementalGroups {
			errs = append(errs, nonNegative(g, sp.Child("supplementalGroups").Index(i))...)
		}
	}
	return errs
}

// containerSecurity refuses what the kubelet cannot apply of a container's securityContext;
// runAsUser/runAsGroup/runAsNonRoot, readOnlyRootFilesystem, capabilities and
// allowPrivilegeEscalation are applied.
func containerSecurity(sc *corev1.SecurityContext, p *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
	forbid := func(set bool, name, why string) {
		if set {
			errs = append(errs, field.Forbidden(p.Child(name), why))
		}
	}
	forbid(sc.Privileged != nil && *sc.Privileged, "privileged", notByKubelet+": privileged containers")
	forbid(sc.SELinuxOptions != nil, "seLinuxOptions", notByKubelet)
	forbid(sc.WindowsOptions != nil, "windowsOptions", notByKubelet)
	if sc.ProcMount != nil {
		errs = append(errs, oneOf(*sc.ProcMount, p.Child("procMount"), corev1.DefaultProcMount)...)
	}
	errs = append(errs, profiles(sc.SeccompProfile, sc.AppArmorProfile, p)...)
	errs = append(errs, ids(sc.RunAsUser, sc.RunAsGroup, p)...)
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation && sc.Capabilities != nil {
		for i, c := range sc.Capabilities.Add {
			if c == "SYS_ADMIN" || c == "CAP_SYS_ADMIN" {
				errs = append(errs, field.Invalid(p.Child("capabilities", "add").Index(i), c, "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
			}
		}
	}
	return errs
}

// profiles accepts only Unconfined seccomp and AppArmor profiles: the node loads no profile,
// which is what Unconfined asks for.
func profiles(seccomp *corev1.SeccompProfile, apparmor *corev1.AppArmorProfile, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if seccomp != nil {
		errs = append(errs, oneOf(seccomp.Type, p.Child("seccompProfile", "type"), corev1.SeccompProfileTypeUnconfined)...)
	}
	if apparmor != nil {
		errs = append(errs, oneOf(apparmor.Type, p.Child("appArmorProfile", "type"), corev1.AppArmorProfileTypeUnconfined)...)
	}
	return errs
}

func ids(user, group *int64, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		errs = append(errs, nonNegative(*user, p.Child("runAsUser"))...)
	}
	if group != nil {
		errs = append(errs, nonNegative(*group, p.Child("runAsGroup"))...)
	}
	return errs
}

// hostAliases checks each entry has a valid IP and host names, as it becomes an /etc/hosts line.
func hostAliases(as []corev1.HostAlias, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, a := range as {
		ap := p.Index(i)
		errs = append(errs, validation.IsValidIP(ap.Child("ip"), a.IP)...)
		for j, h := range a.Hostnames {
			errs = append(errs, dnsSubdomain(h, ap.Child("hostnames").Index(j))...)
		}
	}
	return errs
}
