package validation_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestPodDisruptionBudgetRules(t *testing.T) {
	pdb := func(edit func(*policyv1.PodDisruptionBudget)) *policyv1.PodDisruptionBudget {
		p := &policyv1.PodDisruptionBudget{ObjectMeta: meta("web"), Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
		edit(p)
		return p
	}
	check(t, "valid", pdb(func(*policyv1.PodDisruptionBudget) {}), "", "")
	check(t, "percent", pdb(func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = ptr(intstr.FromString("50%")) }), "", "")
	check(t, "empty selector selects all", pdb(func(p *policyv1.PodDisruptionBudget) { p.Spec.Selector = &metav1.LabelSelector{} }), "", "")
	check(t, "both", pdb(func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = ptr(intstr.FromInt32(1)) }),
		"spec", "minAvailable and maxUnavailable cannot be both set")
	check(t, "over 100%", pdb(func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = ptr(intstr.FromString("101%")) }),
		"spec.minAvailable", "100%")
	check(t, "negative", pdb(func(p *policyv1.PodDisruptionBudget) {
		p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, ptr(intstr.FromInt32(-1))
	}),
		"spec.maxUnavailable", "greater than or equal to 0")
	check(t, "policy", pdb(func(p *policyv1.PodDisruptionBudget) {
		p.Spec.UnhealthyPodEvictionPolicy = ptr(policyv1.UnhealthyPodEvictionPolicyType("Never"))
	}),
		"spec.unhealthyPodEvictionPolicy", "Unsupported value")
	check(t, "bad selector", pdb(func(p *policyv1.PodDisruptionBudget) {
		p.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}
	}), "spec.selector.matchExpressions[0].operator", "not a valid selector operator")
	check(t, "status", pdb(func(p *policyv1.PodDisruptionBudget) { p.Status.DisruptionsAllowed = -1 }), "status.disruptionsAllowed", "greater than or equal to 0")
}

func TestEndpointsRules(t *testing.T) {
	ep := func(edit func(*corev1.EndpointSubset)) *corev1.Endpoints {
		ss := corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}, Ports: []corev1.EndpointPort{{Name: "http", Port: 80}}}
		edit(&ss)
		return &corev1.Endpoints{ObjectMeta: meta("web"), Subsets: []corev1.EndpointSubset{ss}}
	}
	check(t, "valid", ep(func(*corev1.EndpointSubset) {}), "", "")
	check(t, "bad ip", ep(func(s *corev1.EndpointSubset) { s.Addresses[0].IP = "10.0.0" }), "subsets[0].addresses[0].ip", "valid IP")
	check(t, "no addresses", ep(func(s *corev1.EndpointSubset) { s.Addresses = nil }), "subsets[0]", "addresses")
	check(t, "unnamed of two", ep(func(s *corev1.EndpointSubset) { s.Ports = append(s.Ports, corev1.EndpointPort{Port: 81}) }), "subsets[0].ports[1].name", "Required")
	check(t, "port", ep(func(s *corev1.EndpointSubset) { s.Ports[0].Port = 70000 }), "subsets[0].ports[0].port", "between 1 and 65535")
}
