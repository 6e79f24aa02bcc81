package validation_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Each pod field the node does not honour is refused at its own path; what it honours passes.
func TestUnsupportedPodFieldsAreRefused(t *testing.T) {
	const kubelet = "Forbidden: not supported by Skiff's kubelet"
	c0 := "spec.containers[0].securityContext"
	csc := func(f func(*corev1.SecurityContext)) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{}
			f(s.Containers[0].SecurityContext)
		}
	}
	psc := func(f func(*corev1.PodSecurityContext)) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{}
			f(s.SecurityContext)
		}
	}
	for _, tc := range []struct {
		name, path, want string
		mut              func(*corev1.PodSpec)
	}{
		{"hostNetwork", "spec.hostNetwork", kubelet, func(s *corev1.PodSpec) { s.HostNetwork = true }},
		{"hostPID", "spec.hostPID", kubelet, func(s *corev1.PodSpec) { s.HostPID = true }},
		{"hostIPC", "spec.hostIPC", kubelet, func(s *corev1.PodSpec) { s.HostIPC = true }},
		{"shareProcessNamespace", "spec.shareProcessNamespace", kubelet, func(s *corev1.PodSpec) { s.ShareProcessNamespace = ptr(true) }},
		{"hostUsers false", "spec.hostUsers", kubelet, func(s *corev1.PodSpec) { s.HostUsers = ptr(false) }},
		{"runtimeClassName", "spec.runtimeClassName", kubelet, func(s *corev1.PodSpec) { s.RuntimeClassName = ptr("gvisor") }},
		{"setHostnameAsFQDN", "spec.setHostnameAsFQDN", kubelet, func(s *corev1.PodSpec) { s.SetHostnameAsFQDN = ptr(true) }},
		{"hostnameOverride", "spec.hostnameOverride", kubelet, func(s *corev1.PodSpec) { s.HostnameOverride = ptr("h") }},
		{"activeDeadlineSeconds", "spec.activeDeadlineSeconds", kubelet, func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = ptr(int64(30)) }},
		{"readinessGates", "spec.readinessGates", kubelet, func(s *corev1.PodSpec) {
			s.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/ready"}}
		}},
		{"resourceClaims", "spec.resourceClaims", "dynamic resource allocation is not supported", func(s *corev1.PodSpec) {
			s.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu"}}
		}},
		{"schedulingGates", "spec.schedulingGates", "not supported by Skiff's scheduler", func(s *corev1.PodSpec) {
			s.SchedulingGates = []corev1.PodSchedulingGate{{Name: "wait"}}
		}},
		{"os windows", "spec.os.name", `Unsupported value: "windows"`, func(s *corev1.PodSpec) { s.OS = &corev1.PodOS{Name: corev1.Windows} }},
		{"hostAliases bad ip", "spec.hostAliases[0].ip", "must be a valid IP address", func(s *corev1.PodSpec) {
			s.HostAliases = []corev1.HostAlias{{IP: "nope", Hostnames: []string{"a"}}}
		}},
		{"volumeDevices", "spec.containers[0].volumeDevices", "block volumes", func(s *corev1.PodSpec) {
			s.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "d", DevicePath: "/dev/xvda"}}
		}},
		{"restartPolicyRules", "spec.containers[0].restartPolicyRules", kubelet, func(s *corev1.PodSpec) {
			s.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{Action: "Restart"}}
		}},
		{"pod fsGroup", "spec.securityContext.fsGroup", kubelet, psc(func(sc *corev1.PodSecurityContext) { sc.FSGroup = ptr(int64(2000)) })},
		{"pod sysctls", "spec.securityContext.sysctls", kubelet, psc(func(sc *corev1.PodSecurityContext) {
			sc.Sysctls = []corev1.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}}
		})},
		{"pod seLinuxOptions", "spec.securityContext.seLinuxOptions", kubelet, psc(func(sc *corev1.PodSecurityContext) { sc.SELinuxOptions = &corev1.SELinuxOptions{} })},
		{"pod seccomp RuntimeDefault", "spec.securityContext.seccompProfile.type", `Unsupported value: "RuntimeDefault"`, psc(func(sc *corev1.PodSecurityContext) {
			sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		})},
		{"pod supplementalGroupsPolicy Strict", "spec.securityContext.supplementalGroupsPolicy", `Unsupported value: "Strict"`, psc(func(sc *corev1.PodSecurityContext) {
			sc.SupplementalGroupsPolicy = ptr(corev1.SupplementalGroupsPolicyStrict)
		})},
		{"pod negative runAsUser", "spec.securityContext.runAsUser", "must be greater than or equal to 0", psc(func(sc *corev1.PodSecurityContext) { sc.RunAsUser = ptr(int64(-1)) })},
		{"privileged", c0 + ".privileged", kubelet, csc(func(sc *corev1.SecurityContext) { sc.Privileged = ptr(true) })},
		{"procMount Unmasked", c0 + ".procMount", `Unsupported value: "Unmasked"`, csc(func(sc *corev1.SecurityContext) { sc.ProcMount = ptr(corev1.UnmaskedProcMount) })},
		{"appArmor Localhost", c0 + ".appArmorProfile.type", `Unsupported value: "Localhost"`, csc(func(sc *corev1.SecurityContext) {
			sc.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr("p")}
		})},
		{"windowsOptions", c0 + ".windowsOptions", kubelet, csc(func(sc *corev1.SecurityContext) { sc.WindowsOptions = &corev1.WindowsSecurityContextOptions{} })},
		{"no escalation with SYS_ADMIN", c0 + ".capabilities.add[0]", "CAP_SYS_ADMIN", csc(func(sc *corev1.SecurityContext) {
			sc.AllowPrivilegeEscalation = ptr(false)
			sc.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}
		})},
		// What the kubelet applies, and what equals its behaviour anyway, passes.
		{"applied security contexts", "", "", func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(3000)),
				RunAsNonRoot: ptr(true), SupplementalGroups: []int64{4000},
				SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined},
				SupplementalGroupsPolicy: ptr(corev1.SupplementalGroupsPolicyMerge)}
			s.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr(int64(1001)), ReadOnlyRootFilesystem: ptr(true),
				Privileged: ptr(false), AllowPrivilegeEscalation: ptr(false), ProcMount: ptr(corev1.DefaultProcMount),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}}}
			s.HostAliases = []corev1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"db.local", "db"}}}
			s.ShareProcessNamespace, s.HostUsers = ptr(false), ptr(true)
			s.OS = &corev1.PodOS{Name: corev1.Linux}
		}},
	} {
		s := podSpec()
		tc.mut(&s)
		check(t, tc.name, &corev1.Pod{ObjectMeta: meta("p"), Spec: s}, tc.path, tc.want)
	}
}
