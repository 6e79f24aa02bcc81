package validation

import (
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxClientIPTimeout is the longest ClientIP session affinity (one day).
const maxClientIPTimeout = 86400

// Service validates a Service.
func Service(s *corev1.Service) field.ErrorList {
	errs := objectMeta(&s.ObjectMeta, true, apivalidation.NameIsDNS1035Label)
	sp := &s.Spec
	errs = append(errs, oneOf(sp.Type, specPath.Child("type"), corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort,
		corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName)...)
	headless := sp.ClusterIP == corev1.ClusterIPNone
	if sp.Type == corev1.ServiceTypeExternalName {
		errs = append(errs, externalName(sp)...)
	} else {
		errs = append(errs, clusterIPs(sp)...)
		if len(sp.Ports) == 0 && !headless {
			errs = append(errs, field.Required(specPath.Child("ports"), ""))
		}
	}
	errs = append(errs, servicePorts(sp)...)
	errs = append(errs, labelMap(sp.Selector, specPath.Child("selector"))...)
	errs = append(errs, oneOf(sp.SessionAffinity, specPath.Child("sessionAffinity"), corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP)...)
	if c := sp.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		tp := specPath.Child("sessionAffinityConfig", "clientIP", "timeoutSeconds")
		if t := *c.ClientIP.TimeoutSeconds; t <= 0 || t > maxClientIPTimeout {
			errs = append(errs, field.Invalid(tp, t, "must be greater than 0 and less than 86400"))
		}
	}
	if sp.InternalTrafficPolicy != nil {
		errs = append(errs, oneOf(*sp.InternalTrafficPolicy, specPath.Child("internalTrafficPolicy"),
			corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal)...)
	}
	if sp.ExternalTrafficPolicy != "" {
		etp := specPath.Child("externalTrafficPolicy")
		if sp.Type != corev1.ServiceTypeNodePort && sp.Type != corev1.ServiceTypeLoadBalancer {
			errs = append(errs, field.Invalid(etp, sp.ExternalTrafficPolicy, "may only be set for externally-accessible services"))
		} else {
			errs = append(errs, oneOf(sp.ExternalTrafficPolicy, etp, corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal)...)
		}
	}
	if sp.HealthCheckNodePort != 0 {
		hp := specPath.Child("healthCheckNodePort")
		if sp.Type != corev1.ServiceTypeLoadBalancer || sp.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
			errs = append(errs, field.Invalid(hp, sp.HealthCheckNodePort, "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
		} else {
			errs = append(errs, messages(hp, sp.HealthCheckNodePort, validation.IsValidPortNum(int(sp.HealthCheckNodePort)))...)
		}
	}
	for i, ip := range sp.ExternalIPs {
		errs = append(errs, validation.IsValidIP(specPath.Child("externalIPs").Index(i), ip)...)
	}
	return errs
}

// externalName: a DNS name and nothing that only proxied Services have (a cluster IP, a
// selector).
func externalName(sp *corev1.ServiceSpec) field.ErrorList {
	var errs field.ErrorList
	ep := specPath.Child("externalName")
	if sp.ExternalName == "" {
		errs = append(errs, field.Required(ep, ""))
	} else {
		errs = append(errs, dnsSubdomain(sp.ExternalName, ep)...)
	}
	if sp.ClusterIP != "" {
		errs = append(errs, field.Forbidden(specPath.Child("clusterIP"), "may not be set for ExternalName services"))
	}
	if len(sp.Selector) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("selector"), "may not be set for ExternalName services"))
	}
	return errs
}

// clusterIPs: "" (to be allocated), "None" (headless, ClusterIP type only) or an IP, mirrored as
// the first of clusterIPs.
func clusterIPs(sp *corev1.ServiceSpec) field.ErrorList {
	var errs field.ErrorList
	cp := specPath.Child("clusterIP")
	switch sp.ClusterIP {
	case "":
	case corev1.ClusterIPNone:
		if sp.Type != corev1.ServiceTypeClusterIP {
			errs = append(errs, field.Invalid(cp, sp.ClusterIP, "may not be set to 'None' for "+string(sp.Type)+" services"))
		}
	default:
		errs = append(errs, validation.IsValidIP(cp, sp.ClusterIP)...)
	}
	if len(sp.ClusterIPs) > 0 && sp.ClusterIPs[0] != sp.ClusterIP {
		errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), sp.ClusterIPs[0], "must match `clusterIP` when both are specified"))
	}
	if len(sp.ClusterIPs) > 2 {
		errs = append(errs, field.TooMany(specPath.Child("clusterIPs"), len(sp.ClusterIPs), 2))
	}
	for i, ip := range sp.ClusterIPs {
		if i > 0 {
			errs = append(errs, validation.IsValidIP(specPath.Child("clusterIPs").Index(i), ip)...)
		}
	}
	if sp.IPFamilyPolicy != nil {
		errs = append(errs, oneOf(*sp.IPFamilyPolicy, specPath.Child("ipFamilyPolicy"), corev1.IPFamilyPolicySingleStack,
			corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack)...)
		if *sp.IPFamilyPolicy == corev1.IPFamilyPolicySingleStack && len(sp.IPFamilies) > 1 {
			errs = append(errs, field.Invalid(specPath.Child("ipFamilies"), sp.IPFamilies, "must have at most one entry when `ipFamilyPolicy` is 'SingleStack'"))
		}
	}
	seen := sets.New[corev1.IPFamily]()
	for i, f := range sp.IPFamilies {
		fp := specPath.Child("ipFamilies").Index(i)
		errs = append(errs, oneOf(f, fp, corev1.IPv4Protocol, corev1.IPv6Protocol)...)
		if seen.Has(f) {
			errs = append(errs, field.Duplicate(fp, f))
		}
		seen.Insert(f)
	}
	return errs
}

type portKey struct {
	port     int32
	protocol corev1.Protocol
}

// servicePorts: every port valid and unique by port+protocol, names required when there are
// several and unique, node ports only for externally reachable types.
func servicePorts(sp *corev1.ServiceSpec) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	keys := sets.New[portKey]()
	nodePorts := sets.New[portKey]()
	for i, port := range sp.Ports {
		pp := specPath.Child("ports").Index(i)
		switch {
		case port.Name == "" && len(sp.Ports) > 1:
			errs = append(errs, field.Required(pp.Child("name"), ""))
		case port.Name != "":
			errs = append(errs, dnsLabel(port.Name, pp.Child("name"))...)
			if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			names.Insert(port.Name)
		}
		errs = append(errs, messages(pp.Child("port"), port.Port, validation.IsValidPortNum(int(port.Port)))...)
		errs = append(errs, protocol(port.Protocol, pp.Child("protocol"))...)
		if sp.Type != corev1.ServiceTypeExternalName || port.TargetPort.IntVal != 0 || port.TargetPort.StrVal != "" {
			errs = append(errs, portNumOrName(port.TargetPort, pp.Child("targetPort"))...)
		}
		if port.NodePort != 0 {
			if sp.Type != corev1.ServiceTypeNodePort && sp.Type != corev1.ServiceTypeLoadBalancer {
				errs = append(errs, field.Forbidden(pp.Child("nodePort"), "may not be used when `type` is '"+string(sp.Type)+"'"))
			} else {
				errs = append(errs, messages(pp.Child("nodePort"), port.NodePort, validation.IsValidPortNum(int(port.NodePort)))...)
			}
			if nk := (portKey{port.NodePort, port.Protocol}); nodePorts.Has(nk) {
				errs = append(errs, field.Duplicate(pp.Child("nodePort"), port.NodePort))
			} else {
				nodePorts.Insert(nk)
			}
		}
		k := portKey{port.Port, port.Protocol}
		if keys.Has(k) {
			errs = append(errs, field.Duplicate(pp, port.Port))
		}
		keys.Insert(k)
	}
	return errs
}

// serviceUpdate keeps an assigned cluster IP: it may only go away with a change to ExternalName.
func serviceUpdate(n, o *corev1.Service) field.ErrorList {
	errs := metaUpdate(&n.ObjectMeta, &o.ObjectMeta)
	if o.Spec.Type == corev1.ServiceTypeExternalName || n.Spec.Type == corev1.ServiceTypeExternalName || o.Spec.ClusterIP == "" {
		return errs
	}
	if n.Spec.ClusterIP != o.Spec.ClusterIP {
		errs = append(errs, field.Invalid(specPath.Child("clusterIP"), n.Spec.ClusterIP, "field is immutable"))
	}
	if len(o.Spec.ClusterIPs) > 0 && len(n.Spec.ClusterIPs) > 0 && n.Spec.ClusterIPs[0] != o.Spec.ClusterIPs[0] {
		errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), n.Spec.ClusterIPs[0], "may not change once set"))
	}
	return errs
}
