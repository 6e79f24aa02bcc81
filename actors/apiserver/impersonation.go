package apiserver

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/actors/apiserver/authz"
)

// Impersonation, as kube-apiserver's filter does it: Impersonate-User (a user or a
// system:serviceaccount:<ns>:<name>), Impersonate-Group (repeatable), Impersonate-Uid and
// Impersonate-Extra-<key> headers each need the `impersonate` verb on users, serviceaccounts,
// groups, uids or userextras/<key>; then everything after (rate limit, authorization,
// admission, NodeRestriction, tracing) sees the impersonated user. It sits right after
// authentication, so it applies alike to HTTP callers and to NATS callers, whose identity is
// their subject: a component may impersonate only where RBAC grants its identity the verb.

const (
	groupServiceAccounts = "system:serviceaccounts"
	saUserPrefix         = "system:serviceaccount:"
)

// actAs is one thing a request asks to act as, and the attributes that authorize it.
type actAs struct {
	resource, group, namespace, name, extraKey string
}

func (s *Server) impersonated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked, err := impersonationRequests(r.Header)
		if err != nil {
			writeError(w, err)
			return
		}
		if len(asked) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		requestor, _ := authn.UserFrom(r.Context())
		for _, a := range asked {
			attrs := authz.Attributes{User: requestor, Verb: "impersonate", ResourceRequest: true, APIGroup: a.group,
				Resource: a.resource, Subresource: a.extraKey, Namespace: a.namespace, Name: a.name}
			if ok, reason := s.mayImpersonate(attrs); !ok {
				writeError(w, authz.Forbidden(attrs, reason))
				return
			}
		}
		u := impersonatedUser(asked, len(r.Header.Values(authenticationv1.ImpersonateGroupHeader)) > 0)
		ctx := authn.WithImpersonator(authn.WithUser(r.Context(), u), requestor)
		r = r.WithContext(ctx)
		r.Header = r.Header.Clone()
		for name := range r.Header {
			if strings.HasPrefix(name, "Impersonate-") {
				r.Header.Del(name)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// mayImpersonate asks the configured authorizer. Without one, where every caller may do
// anything it asks in its own name, only system:masters may act as another: a component's
// NATS identity must not become an admin by asking.
func (s *Server) mayImpersonate(a authz.Attributes) (bool, string) {
	if s.opts.Auth == nil || s.opts.Auth.Authorizer == nil {
		if a.User.InGroup(authn.GroupMasters) {
			return true, ""
		}
		return false, "without an authorizer only system:masters may impersonate"
	}
	return s.opts.Auth.Authorizer.Authorize(a)
}

// impersonationRequests lists what the headers ask to act as; groups, extras or a UID
// without a user are a bad request, as in Kubernetes.
func impersonationRequests(h http.Header) ([]actAs, error) {
	var out []actAs
	user := h.Get(authenticationv1.ImpersonateUserHeader)
	if user != "" {
		if ns, name, ok := splitServiceAccount(user); ok {
			out = append(out, actAs{resource: "serviceaccounts", namespace: ns, name: name})
		} else {
			out = append(out, actAs{resource: "users", name: user})
		}
	}
	var others []string
	for _, g := range h.Values(authenticationv1.ImpersonateGroupHeader) {
		out = append(out, actAs{resource: "groups", name: g})
		others = append(others, authenticationv1.ImpersonateGroupHeader)
	}
	for name, values := range h {
		if !strings.HasPrefix(name, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			continue
		}
		key := strings.ToLower(name[len(authenticationv1.ImpersonateUserExtraHeaderPrefix):])
		if k, err := url.PathUnescape(key); err == nil {
			key = k
		}
		for _, v := range values {
			out = append(out, actAs{resource: "userextras", group: authenticationv1.GroupName, name: v, extraKey: key})
		}
		others = append(others, name)
	}
	if uid := h.Get(authenticationv1.ImpersonateUIDHeader); uid != "" {
		out = append(out, actAs{resource: "uids", group: authenticationv1.GroupName, name: uid})
		others = append(others, authenticationv1.ImpersonateUIDHeader)
	}
	if user == "" && len(others) > 0 {
		return nil, badRequest("requested impersonation (%s) without impersonating a user: %s is required", strings.Join(others, ", "), authenticationv1.ImpersonateUserHeader)
	}
	return out, nil
}

// splitServiceAccount parses system:serviceaccount:<namespace>:<name> as Kubernetes does:
// both parts must be valid names, else the string is an ordinary user name.
func splitServiceAccount(user string) (ns, name string, ok bool) {
	rest, found := strings.CutPrefix(user, saUserPrefix)
	parts := strings.Split(rest, ":")
	if !found || len(parts) != 2 {
		return "", "", false
	}
	if len(apivalidation.ValidateNamespaceName(parts[0], false)) > 0 || len(apivalidation.ValidateServiceAccountName(parts[1], false)) > 0 {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// impersonatedUser builds the user the request runs as. A service account without explicit
// groups gets its fixed ones; everyone but system:anonymous is in system:authenticated unless
// the groups already say authenticated or unauthenticated.
func impersonatedUser(asked []actAs, groupsSpecified bool) authn.User {
	var u authn.User
	for _, a := range asked {
		switch a.resource {
		case "serviceaccounts":
			u.Name = fmt.Sprintf("%s%s:%s", saUserPrefix, a.namespace, a.name)
			if !groupsSpecified {
				u.Groups = []string{groupServiceAccounts, groupServiceAccounts + ":" + a.namespace}
			}
		case "users":
			u.Name = a.name
		case "groups":
			u.Groups = append(u.Groups, a.name)
		case "userextras":
			if u.Extra == nil {
				u.Extra = map[string][]string{}
			}
			u.Extra[a.extraKey] = append(u.Extra[a.extraKey], a.name)
		case "uids":
			u.UID = a.name
		}
	}
	if u.Name == authn.Anonymous {
		if !u.InGroup(groupUnauthenticated) {
			u.Groups = append(u.Groups, groupUnauthenticated)
		}
	} else if !u.InGroup(authn.GroupAuthenticated) && !u.InGroup(groupUnauthenticated) {
		u.Groups = append(u.Groups, authn.GroupAuthenticated)
	}
	return u
}
