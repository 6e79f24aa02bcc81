package validation

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The limits Kubernetes validates a pod's dnsConfig against (what a resolver reads).
const (
	maxDNSNameservers    = 3
	maxDNSSearchPaths    = 32
	maxDNSSearchListChar = 2048
)

// podDNS validates dnsPolicy and dnsConfig as Kubernetes does: None needs a nameserver, at
// most three IP nameservers, at most 32 search domains (DNS subdomains, a trailing dot
// allowed) of 2048 characters in all, and named options.
func podDNS(s *corev1.PodSpec, p *field.Path) field.ErrorList {
	errs := oneOf(s.DNSPolicy, p.Child("dnsPolicy"),
		corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone)
	d, dp := s.DNSConfig, p.Child("dnsConfig")
	if s.DNSPolicy == corev1.DNSNone {
		if d == nil {
			return append(errs, field.Required(dp, fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", corev1.DNSNone)))
		}
		if len(d.Nameservers) == 0 {
			errs = append(errs, field.Required(dp.Child("nameservers"), fmt.Sprintf("must provide at least one DNS nameserver when `dnsPolicy` is %s", corev1.DNSNone)))
		}
	}
	if d == nil {
		return errs
	}
	if len(d.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.Invalid(dp.Child("nameservers"), d.Nameservers, fmt.Sprintf("must not have more than %v nameservers", maxDNSNameservers)))
	}
	for i, ns := range d.Nameservers {
		if _, err := netip.ParseAddr(ns); err != nil {
			errs = append(errs, field.Invalid(dp.Child("nameservers").Index(i), ns, "must be valid IP address"))
		}
	}
	if len(d.Searches) > maxDNSSearchPaths {
		errs = append(errs, field.Invalid(dp.Child("searches"), d.Searches, fmt.Sprintf("must not have more than %v search paths", maxDNSSearchPaths)))
	}
	if n := len(strings.Join(d.Searches, " ")); n > maxDNSSearchListChar {
		errs = append(errs, field.Invalid(dp.Child("searches"), d.Searches, fmt.Sprintf("must not have more than %v characters (including spaces) in the search list", maxDNSSearchListChar)))
	}
	for i, search := range d.Searches {
		errs = append(errs, dnsSubdomain(strings.TrimSuffix(search, "."), dp.Child("searches").Index(i))...)
	}
	for i, o := range d.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(dp.Child("options").Index(i), "must not be empty"))
		}
	}
	return errs
}
