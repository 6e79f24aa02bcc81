package validation

import (
	"net/netip"

	networkingv1 "k8s.io/api/networking/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NetworkPolicy validates a policy with the rules of Kubernetes' networking validation:
// selectors, ports (a number or a name; endPort only after a numeric port and not below it),
// protocols TCP/UDP/SCTP, peers (at least one selector or an ipBlock, never an ipBlock with
// another peer), CIDRs in strict form with each except a strict subset, policy types.
func NetworkPolicy(np *networkingv1.NetworkPolicy) field.ErrorList {
	errs := objectMeta(&np.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	sp := field.NewPath("spec")
	errs = append(errs, metav1validation.ValidateLabelSelector(&np.Spec.PodSelector, metav1validation.LabelSelectorValidationOptions{}, sp.Child("podSelector"))...)
	for i, r := range np.Spec.Ingress {
		p := sp.Child("ingress").Index(i)
		errs = append(errs, networkPolicyRule(r.Ports, r.From, p, "from")...)
	}
	for i, r := range np.Spec.Egress {
		p := sp.Child("egress").Index(i)
		errs = append(errs, networkPolicyRule(r.Ports, r.To, p, "to")...)
	}
	tp := sp.Child("policyTypes")
	if len(np.Spec.PolicyTypes) > 2 {
		return append(errs, field.Invalid(tp, np.Spec.PolicyTypes, "may not specify more than two policyTypes"))
	}
	for i, t := range np.Spec.PolicyTypes {
		errs = append(errs, oneOf(t, tp.Index(i), networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress)...)
	}
	return errs
}

// networkPolicyUpdate adds metadata's update rules. Kubernetes also lets an update keep a
// CIDR the old object had even if invalid now; Skiff validated CIDRs strictly from its first
// version, so no stored policy has one.
func networkPolicyUpdate(n, o *networkingv1.NetworkPolicy) field.ErrorList {
	return metaUpdate(&n.ObjectMeta, &o.ObjectMeta)
}

func networkPolicyRule(ports []networkingv1.NetworkPolicyPort, peers []networkingv1.NetworkPolicyPeer, p *field.Path, peersName string) field.ErrorList {
	var errs field.ErrorList
	for i := range ports {
		errs = append(errs, networkPolicyPort(&ports[i], p.Child("ports").Index(i))...)
	}
	for i := range peers {
		errs = append(errs, networkPolicyPeer(&peers[i], p.Child(peersName).Index(i))...)
	}
	return errs
}

func networkPolicyPort(port *networkingv1.NetworkPolicyPort, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if port.Protocol != nil {
		errs = append(errs, protocol(*port.Protocol, p.Child("protocol"))...)
	}
	ep := p.Child("endPort")
	switch {
	case port.Port == nil:
		if port.EndPort != nil {
			errs = append(errs, field.Invalid(ep, *port.EndPort, "may not be specified when `port` is not specified"))
		}
	case port.Port.Type == intstr.Int:
		errs = append(errs, messages(p.Child("port"), port.Port.IntVal, validation.IsValidPortNum(int(port.Port.IntVal)))...)
		if port.EndPort != nil {
			if *port.EndPort < port.Port.IntVal {
				errs = append(errs, field.Invalid(ep, *port.EndPort, "must be greater than or equal to `port`"))
			}
			errs = append(errs, messages(ep, *port.EndPort, validation.IsValidPortNum(int(*port.EndPort)))...)
		}
	default:
		if port.EndPort != nil {
			errs = append(errs, field.Invalid(ep, *port.EndPort, "may not be specified when `port` is non-numeric"))
		}
		errs = append(errs, messages(p.Child("port"), port.Port.StrVal, validation.IsValidPortName(port.Port.StrVal))...)
	}
	return errs
}

func networkPolicyPeer(peer *networkingv1.NetworkPolicyPeer, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	opts := metav1validation.LabelSelectorValidationOptions{}
	n := 0
	if peer.PodSelector != nil {
		n++
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.PodSelector, opts, p.Child("podSelector"))...)
	}
	if peer.NamespaceSelector != nil {
		n++
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.NamespaceSelector, opts, p.Child("namespaceSelector"))...)
	}
	if peer.IPBlock != nil {
		n++
		errs = append(errs, ipBlock(peer.IPBlock, p.Child("ipBlock"))...)
	}
	switch {
	case n == 0:
		errs = append(errs, field.Required(p, "must specify a peer"))
	case n > 1 && peer.IPBlock != nil:
		errs = append(errs, field.Forbidden(p, "may not specify both ipBlock and another peer"))
	}
	return errs
}

func ipBlock(b *networkingv1.IPBlock, p *field.Path) field.ErrorList {
	cp := p.Child("cidr")
	if b.CIDR == "" {
		return field.ErrorList{field.Required(cp, "")}
	}
	errs := validation.IsValidCIDR(cp, b.CIDR)
	if len(errs) > 0 {
		return errs
	}
	cidr := netip.MustParsePrefix(b.CIDR)
	for i, e := range b.Except {
		xp := p.Child("except").Index(i)
		xerrs := validation.IsValidCIDR(xp, e)
		if len(xerrs) > 0 {
			errs = append(errs, xerrs...)
			continue
		}
		x := netip.MustParsePrefix(e)
		if !cidr.Contains(x.Addr()) || cidr.Bits() >= x.Bits() {
			errs = append(errs, field.Invalid(xp, e, "must be a strict subset of `cidr`"))
		}
	}
	return errs
}
