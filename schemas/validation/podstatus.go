package validation

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/skiff-sh/skiff/schemas/podspec"
)

var statusPath = field.NewPath("status")

// ValidateStatusUpdate checks a write of the status subresource, as kube-apiserver's status
// strategies do: a Pod's by what the write may change (its status) and that nothing else
// changed, not by the spec it cannot change (checked when it was written; every kubelet
// status report comes here). Kinds without status rules of their own are checked as a whole
// update.
func ValidateStatusUpdate(newObj, oldObj runtime.Object) field.ErrorList {
	if n, ok := newObj.(*corev1.Pod); ok {
		if o, ok := oldObj.(*corev1.Pod); ok {
			return podStatusUpdate(n, o)
		}
	}
	return ValidateUpdate(newObj, oldObj)
}

// systemPodConditions are the condition types the apiserver and kubelet own; others must be
// qualified names.
var systemPodConditions = sets.New(corev1.PodScheduled, corev1.PodReady, corev1.PodInitialized)

// podStatusUpdate follows kube-apiserver's ValidatePodStatusUpdate: metadata and spec as they
// were (podUpdate), condition types, the nominated node's name, pod and host IPs, and no
// container leaving the terminated state when it may not restart.
func podStatusUpdate(n, o *corev1.Pod) field.ErrorList {
	errs := podUpdate(n, o)
	st := &n.Status
	for i, c := range st.Conditions {
		if !systemPodConditions.Has(c.Type) {
			errs = append(errs, messages(statusPath.Child("conditions").Index(i).Child("type"), c.Type, validation.IsQualifiedName(string(c.Type)))...)
		}
	}
	if st.NominatedNodeName != "" && st.NominatedNodeName != o.Status.NominatedNodeName {
		errs = append(errs, messages(statusPath.Child("nominatedNodeName"), st.NominatedNodeName, apivalidation.NameIsDNSSubdomain(st.NominatedNodeName, false))...)
	}
	podIPs := make([]string, len(st.PodIPs))
	for i, ip := range st.PodIPs {
		podIPs[i] = ip.IP
	}
	errs = append(errs, ipFamilies(podIPs, statusPath.Child("podIPs"))...)
	if len(st.HostIPs) > 0 && st.HostIP != st.HostIPs[0].IP {
		errs = append(errs, field.Invalid(statusPath.Child("hostIPs").Index(0).Child("ip"), st.HostIPs[0].IP, "must be equal to `hostIP`"))
	}
	hostIPs := make([]string, len(st.HostIPs))
	for i, ip := range st.HostIPs {
		hostIPs[i] = ip.IP
	}
	errs = append(errs, ipFamilies(hostIPs, statusPath.Child("hostIPs"))...)
	policy := o.Spec.RestartPolicy
	errs = append(errs, stayTerminated(st.ContainerStatuses, o.Status.ContainerStatuses, policy, nil, statusPath.Child("containerStatuses"))...)
	errs = append(errs, stayTerminated(st.InitContainerStatuses, o.Status.InitContainerStatuses, policy, n.Spec.InitContainers, statusPath.Child("initContainerStatuses"))...)
	// Ephemeral containers are never restarted.
	return append(errs, stayTerminated(st.EphemeralContainerStatuses, o.Status.EphemeralContainerStatuses, corev1.RestartPolicyNever, nil, statusPath.Child("ephemeralContainerStatuses"))...)
}

// ipFamilies checks a pod's or host's IP list: valid IPs, at most one of each family, none
// twice.
func ipFamilies(ips []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ip := range ips {
		errs = append(errs, validation.IsValidIP(p.Index(i).Child("ip"), ip)...)
	}
	if len(ips) < 2 || len(errs) > 0 {
		return errs
	}
	if dual, err := netutils.IsDualStackIPStrings(ips); err != nil || !dual || len(ips) > 2 {
		errs = append(errs, field.Invalid(p, ips, "may specify no more than one IP for each IP family"))
	}
	seen := sets.New[string]()
	for i, ip := range ips {
		if seen.Has(ip) {
			errs = append(errs, field.Duplicate(p.Index(i).Child("ip"), ip))
		}
		seen.Insert(ip)
	}
	return errs
}

// stayTerminated forbids a container that terminated, and may not restart, to be reported
// running or waiting again: under restartPolicy Always every container may, under OnFailure
// one that failed, and a sidecar among inits (the pod's init containers, for their statuses)
// always.
func stayTerminated(next, old []corev1.ContainerStatus, policy corev1.RestartPolicy, inits []corev1.Container, p *field.Path) field.ErrorList {
	if policy == corev1.RestartPolicyAlways {
		return nil
	}
	var errs field.ErrorList
	for i, was := range old {
		t := was.State.Terminated
		if t == nil || (t.ExitCode != 0 && policy == corev1.RestartPolicyOnFailure) || isSidecarNamed(inits, was.Name) {
			continue
		}
		for _, now := range next {
			if now.Name == was.Name && now.State.Terminated == nil {
				errs = append(errs, field.Forbidden(p.Index(i).Child("state"), "may not be transitioned to non-terminated state"))
			}
		}
	}
	return errs
}

// isSidecarNamed reports whether the init container called name is a sidecar.
func isSidecarNamed(inits []corev1.Container, name string) bool {
	i := slices.IndexFunc(inits, func(c corev1.Container) bool { return c.Name == name })
	return i >= 0 && podspec.IsSidecar(&inits[i])
}
