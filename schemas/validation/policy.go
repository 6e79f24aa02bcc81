package validation

import (
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PodDisruptionBudget validates a PDB as Kubernetes' policy validation does: at most one of
// minAvailable and maxUnavailable, each a non-negative count or a percentage up to 100%, a
// valid (possibly empty) selector, a known unhealthy-pod eviction policy, sane status counts.
func PodDisruptionBudget(pdb *policyv1.PodDisruptionBudget) field.ErrorList {
	errs := objectMeta(&pdb.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	sp := field.NewPath("spec")
	spec := &pdb.Spec
	if spec.MinAvailable != nil && spec.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(sp, spec, "minAvailable and maxUnavailable cannot be both set"))
	}
	errs = append(errs, intOrPercent(spec.MinAvailable, sp.Child("minAvailable"), true)...)
	errs = append(errs, intOrPercent(spec.MaxUnavailable, sp.Child("maxUnavailable"), true)...)
	if spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, sp.Child("selector"))...)
	}
	if p := spec.UnhealthyPodEvictionPolicy; p != nil {
		errs = append(errs, oneOf(*p, sp.Child("unhealthyPodEvictionPolicy"), policyv1.IfHealthyBudget, policyv1.AlwaysAllow)...)
	}
	st, stp := &pdb.Status, field.NewPath("status")
	errs = append(errs, nonNegative(int64(st.DisruptionsAllowed), stp.Child("disruptionsAllowed"))...)
	errs = append(errs, nonNegative(int64(st.CurrentHealthy), stp.Child("currentHealthy"))...)
	errs = append(errs, nonNegative(int64(st.DesiredHealthy), stp.Child("desiredHealthy"))...)
	errs = append(errs, nonNegative(int64(st.ExpectedPods), stp.Child("expectedPods"))...)
	return append(errs, metav1validation.ValidateConditions(st.Conditions, stp.Child("conditions"))...)
}

// Endpoints validates core/v1 Endpoints: every address a valid IP with optional hostname and
// node name, ports valid and, when a subset has several, named uniquely.
func Endpoints(ep *corev1.Endpoints) field.ErrorList {
	errs := objectMeta(&ep.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	for i, ss := range ep.Subsets {
		p := field.NewPath("subsets").Index(i)
		if len(ss.Addresses)+len(ss.NotReadyAddresses) == 0 {
			errs = append(errs, field.Required(p, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j, a := range ss.Addresses {
			errs = append(errs, endpointAddress(a, p.Child("addresses").Index(j))...)
		}
		for j, a := range ss.NotReadyAddresses {
			errs = append(errs, endpointAddress(a, p.Child("notReadyAddresses").Index(j))...)
		}
		names := sets.New[string]()
		for j, port := range ss.Ports {
			pp := p.Child("ports").Index(j)
			switch {
			case len(ss.Ports) > 1 && port.Name == "":
				errs = append(errs, field.Required(pp.Child("name"), ""))
			case port.Name != "":
				errs = append(errs, dnsLabel(port.Name, pp.Child("name"))...)
			}
			if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			names.Insert(port.Name)
			errs = append(errs, messages(pp.Child("port"), port.Port, validation.IsValidPortNum(int(port.Port)))...)
			errs = append(errs, protocol(port.Protocol, pp.Child("protocol"))...)
		}
	}
	return errs
}

func endpointAddress(a corev1.EndpointAddress, p *field.Path) field.ErrorList {
	errs := validation.IsValidIP(p.Child("ip"), a.IP)
	if a.Hostname != "" {
		errs = append(errs, dnsLabel(a.Hostname, p.Child("hostname"))...)
	}
	if a.NodeName != nil {
		errs = append(errs, dnsSubdomain(*a.NodeName, p.Child("nodeName"))...)
	}
	return errs
}
