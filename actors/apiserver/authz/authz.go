// Package authz decides whether a caller may do what a request asks, with Kubernetes' RBAC
// rules: Roles and ClusterRoles granted through RoleBindings and ClusterRoleBindings. The rules
// are read from an in-memory mirror of the state log (informers), never per request from the log.
package authz

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
)

// Attributes are what a request asks to do.
type Attributes struct {
	User            authn.User
	Verb            string // get list watch create update patch delete deletecollection; for paths: get post put ...
	ResourceRequest bool
	APIGroup        string
	Resource        string
	Subresource     string
	Namespace       string
	Name            string
	Path            string // non-resource requests
}

// Authorizer answers one question: may a.User do a? reason explains a denial (may be "").
type Authorizer interface {
	Authorize(a Attributes) (allowed bool, reason string)
}

// Forbidden is the 403 Kubernetes returns for a denied request, with its message form:
// `pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "x"`.
func Forbidden(a Attributes, reason string) error {
	var msg string
	if !a.ResourceRequest {
		msg = fmt.Sprintf("User %q cannot %s path %q", a.User.Name, a.Verb, a.Path)
	} else {
		res := a.Resource
		if a.Subresource != "" {
			res += "/" + a.Subresource
		}
		msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q", a.User.Name, a.Verb, res, a.APIGroup)
		if a.Namespace != "" {
			msg += fmt.Sprintf(" in the namespace %q", a.Namespace)
		} else {
			msg += " at the cluster scope"
		}
	}
	if reason != "" {
		msg += ": " + reason
	}
	gr := schema.GroupResource{}
	if a.ResourceRequest {
		gr = schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}
	}
	return apierrors.NewForbidden(gr, a.Name, errors.New(msg))
}

// verbMatches and friends implement RBAC's matching: "*" matches anything.
func contains(list []string, v string) bool {
	for _, x := range list {
		if x == "*" || x == v {
			return true
		}
	}
	return false
}

// resourceMatches accepts "pods", "pods/status", "*" and "*/scale" forms.
func resourceMatches(list []string, resource, sub string) bool {
	full := resource
	if sub != "" {
		full += "/" + sub
	}
	for _, r := range list {
		if r == "*" || r == full || (sub != "" && r == "*/"+sub) {
			return true
		}
	}
	return false
}

// pathMatches accepts exact paths, "*", and prefixes ending in "*" ("/apis/*").
func pathMatches(list []string, path string) bool {
	for _, p := range list {
		if p == "*" || p == path || (strings.HasSuffix(p, "*") && strings.HasPrefix(path, strings.TrimSuffix(p, "*"))) {
			return true
		}
	}
	return false
}
