package authz

import (
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
)

// Rules is what a user may do in one namespace, as a SelfSubjectRulesReview reports it.
// Incomplete says an authorizer decides more than the rules show (the node authorizer).
type Rules struct {
	Resource    []authorizationv1.ResourceRule
	NonResource []authorizationv1.NonResourceRule
	Incomplete  bool
	Error       string
}

// RulesResolver lists the rules an authorizer would apply to u in namespace ("" = only the
// cluster-wide ones).
type RulesResolver interface {
	ReviewRules(u authn.User, namespace string) Rules
}

// everything is what system:masters holds, as Kubernetes' privileged-group authorizer reports it.
var everything = []rbacv1.PolicyRule{{Verbs: all, APIGroups: all, Resources: all}, {Verbs: all, NonResourceURLs: all}}

// ReviewRules is RulesFor for a review, with what system:masters holds whatever the bindings say.
func (r *RBAC) ReviewRules(u authn.User, namespace string) Rules {
	var out Rules
	if u.InGroup(authn.GroupMasters) {
		out.add(everything)
	}
	out.add(r.RulesFor(u, namespace))
	return out
}

// ReviewRules reports the next authorizer's rules; for a node identity they are incomplete,
// since the pod graph, not a rule, decides its Secrets and ConfigMaps.
func (n *Node) ReviewRules(u authn.User, namespace string) Rules {
	var out Rules
	if rr, ok := n.Next.(RulesResolver); ok {
		out = rr.ReviewRules(u, namespace)
	}
	if u.NodeName() != "" {
		out.Incomplete = true
		out.Error = "node authorizer does not support user rule resolution"
	}
	return out
}

// add splits policy rules into the review's resource and non-resource rules.
func (r *Rules) add(rules []rbacv1.PolicyRule) {
	for _, p := range rules {
		if len(p.Resources) > 0 {
			r.Resource = append(r.Resource, authorizationv1.ResourceRule{Verbs: p.Verbs, APIGroups: p.APIGroups,
				Resources: p.Resources, ResourceNames: p.ResourceNames})
		}
		if len(p.NonResourceURLs) > 0 {
			r.NonResource = append(r.NonResource, authorizationv1.NonResourceRule{Verbs: p.Verbs, NonResourceURLs: p.NonResourceURLs})
		}
	}
}
