package validation

import (
	"net/netip"

	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits of an EndpointSlice, as in Kubernetes.
const (
	maxEndpoints         = 1000
	maxEndpointAddresses = 100
	maxEndpointPorts     = 20000
)

// EndpointSlice validates an EndpointSlice: a known address type, addresses of that type, and
// unique, valid ports.
func EndpointSlice(s *discoveryv1.EndpointSlice) field.ErrorList {
	errs := objectMeta(&s.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	ap := field.NewPath("addressType")
	errs = append(errs, oneOf(s.AddressType, ap, discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN)...)
	ep := field.NewPath("endpoints")
	if len(s.Endpoints) > maxEndpoints {
		errs = append(errs, field.TooMany(ep, len(s.Endpoints), maxEndpoints))
	}
	for i, e := range s.Endpoints {
		errs = append(errs, endpoint(e, s.AddressType, ep.Index(i))...)
	}
	pp := field.NewPath("ports")
	if len(s.Ports) > maxEndpointPorts {
		errs = append(errs, field.TooMany(pp, len(s.Ports), maxEndpointPorts))
	}
	names := sets.New[string]()
	for i, port := range s.Ports {
		p := pp.Index(i)
		name := ""
		if port.Name != nil {
			name = *port.Name
		}
		if name != "" {
			errs = append(errs, dnsLabel(name, p.Child("name"))...)
		}
		if names.Has(name) {
			errs = append(errs, field.Duplicate(p.Child("name"), name))
		}
		names.Insert(name)
		if port.Protocol == nil {
			errs = append(errs, field.Required(p.Child("protocol"), ""))
		} else {
			errs = append(errs, protocol(*port.Protocol, p.Child("protocol"))...)
		}
		if port.Port != nil {
			errs = append(errs, messages(p.Child("port"), *port.Port, validation.IsValidPortNum(int(*port.Port)))...)
		}
	}
	return errs
}

func endpoint(e discoveryv1.Endpoint, at discoveryv1.AddressType, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	ap := p.Child("addresses")
	switch n := len(e.Addresses); {
	case n == 0:
		errs = append(errs, field.Required(ap, "must contain at least 1 address"))
	case n > maxEndpointAddresses:
		errs = append(errs, field.TooMany(ap, n, maxEndpointAddresses))
	}
	for i, a := range e.Addresses {
		errs = append(errs, address(a, at, ap.Index(i))...)
	}
	if e.NodeName != nil {
		errs = append(errs, dnsSubdomain(*e.NodeName, p.Child("nodeName"))...)
	}
	if e.Hostname != nil {
		errs = append(errs, dnsLabel(*e.Hostname, p.Child("hostname"))...)
	}
	return errs
}

func address(a string, at discoveryv1.AddressType, p *field.Path) field.ErrorList {
	switch at {
	case discoveryv1.AddressTypeIPv4:
		errs := validation.IsValidIP(p, a)
		if len(errs) == 0 && !isIPv4(a) {
			errs = append(errs, field.Invalid(p, a, "must be an IPv4 address"))
		}
		return errs
	case discoveryv1.AddressTypeIPv6:
		errs := validation.IsValidIP(p, a)
		if len(errs) == 0 && isIPv4(a) {
			errs = append(errs, field.Invalid(p, a, "must be an IPv6 address"))
		}
		return errs
	case discoveryv1.AddressTypeFQDN:
		return dnsSubdomain(a, p)
	}
	return nil
}

// Lease validates a coordination Lease.
func Lease(l *coordinationv1.Lease) field.ErrorList {
	errs := objectMeta(&l.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	if d := l.Spec.LeaseDurationSeconds; d != nil {
		errs = append(errs, positive(int64(*d), specPath.Child("leaseDurationSeconds"))...)
	}
	if t := l.Spec.LeaseTransitions; t != nil {
		errs = append(errs, nonNegative(int64(*t), specPath.Child("leaseTransitions"))...)
	}
	if l.Spec.PreferredHolder != nil && *l.Spec.PreferredHolder != "" && l.Spec.Strategy == nil {
		errs = append(errs, field.Forbidden(specPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	if s := l.Spec.Strategy; s != nil {
		errs = append(errs, oneOf(*s, specPath.Child("strategy"), coordinationv1.OldestEmulationVersion)...)
	}
	return errs
}

func isIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}
