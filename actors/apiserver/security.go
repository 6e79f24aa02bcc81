package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/actors/apiserver/authz"
	"github.com/skiff-sh/skiff/schemas"
)

// The request chain (Server.handler), outermost first:
//
//	authenticate  who is calling: a User already in the context (trusted transport: NATS),
//	              else bearer token or client certificate; none -> 401. Strips Authorization,
//	              so nothing after it (metrics, tracing, logs) can record the token.
//	impersonate   Impersonate-* headers, each checked with RBAC's impersonate verb; the rest
//	              of the chain sees the impersonated user (impersonation.go)
//	instrument, trace
//	rate limit    a token bucket and in-flight seats per user (ratelimit.go); system:masters,
//	              the scheduler, the controller-manager and node heartbeats exempt;
//	              over -> 429 + Retry-After
//	authorize     RBAC over every request, watches and subresources included; deny -> 403
//	handler       decode (size limit: 413) -> mutating admission (defaulting, Options.Mutating)
//	              -> validation, Options.Validating, NodeRestriction, RBAC escalation -> write
//
// With Options.Auth nil there is no authentication: callers without an identity act as
// system:masters. That is the embedded/test mode; `skiff up` turns Auth on.

// Auth configures authentication and authorization.
type Auth struct {
	Authenticator *authn.Authenticator
	Authorizer    authz.Authorizer // nil = every authenticated user may do anything
	// WireUser is the identity of NATS requests that carry none (unsecured NATS, where the
	// in-process components are the only callers); nil = such requests get 401.
	WireUser *authn.User
}

// unauthenticatedMaster is who a request is without Options.Auth.
var unauthenticatedMaster = authn.User{Name: "system:admin", Groups: []string{authn.GroupMasters, authn.GroupAuthenticated}}

// openPaths answer without credentials, as in Kubernetes.
var openPaths = map[string]bool{"/healthz": true, "/livez": true, "/readyz": true, "/version": true}

const groupUnauthenticated = "system:unauthenticated"

func isOpen(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && openPaths[strings.TrimSuffix(r.URL.Path, "/")]
}

// wireContext gives a NATS request without an identity the configured one.
func (s *Server) wireContext(ctx context.Context) context.Context {
	if _, ok := authn.UserFrom(ctx); ok || s.opts.Auth == nil || s.opts.Auth.WireUser == nil {
		return ctx
	}
	return authn.WithUser(ctx, *s.opts.Auth.WireUser)
}

func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		u, ok := authn.UserFrom(ctx)
		if !ok {
			switch {
			case s.opts.Auth == nil:
				u = unauthenticatedMaster
			default:
				var found bool
				var err error
				u, found, err = s.opts.Auth.Authenticator.Authenticate(r)
				if err != nil || (!found && !isOpen(r)) {
					writeError(w, apierrors.NewUnauthorized("Unauthorized"))
					return
				}
				if !found {
					u = authn.User{Name: authn.Anonymous, Groups: []string{groupUnauthenticated}}
				}
			}
			ctx = authn.WithUser(ctx, u)
		}
		r = r.WithContext(ctx)
		if r.Header.Get("Authorization") != "" {
			r.Header = r.Header.Clone()
			r.Header.Del("Authorization")
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) authorized(next http.Handler) http.Handler {
	if s.opts.Auth == nil || s.opts.Auth.Authorizer == nil {
		return next
	}
	az := s.opts.Auth.Authorizer
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isOpen(r) {
			next.ServeHTTP(w, r)
			return
		}
		u, _ := authn.UserFrom(r.Context())
		a := authzAttributes(r, u)
		if ok, reason := az.Authorize(a); !ok {
			writeError(w, authz.Forbidden(a, reason))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// connectSubresources are streams that act on a pod: kube authorizes them as create even when
// the WebSocket upgrade arrives as a GET.
var connectSubresources = map[string]bool{"exec": true, "attach": true, "portforward": true}

// authzAttributes is what the authorizer is asked about r.
func authzAttributes(r *http.Request, u authn.User) authz.Attributes {
	info, ok := parseRequest(r)
	if !ok || info.resource == "" { // "/api/v1//x" names no resource: authorize it as a path
		verb := strings.ToLower(r.Method)
		if r.Method == http.MethodHead {
			verb = "get"
		}
		return authz.Attributes{User: u, Verb: verb, Path: r.URL.Path}
	}
	a := authz.Attributes{User: u, ResourceRequest: true, Verb: info.verb, APIGroup: info.gv.Group, Resource: info.resource,
		Subresource: info.subresource, Namespace: info.namespace, Name: info.name}
	if a.Verb == "" {
		a.Verb = strings.ToLower(r.Method)
	}
	if a.Resource == "namespaces" && a.Name != "" {
		a.Namespace = a.Name // a namespace is inside itself for RoleBindings, as in Kubernetes
	}
	if connectSubresources[a.Subresource] {
		a.Verb = "create"
	}
	return a
}

// preventEscalation refuses RBAC writes that grant more than the caller holds, when the
// authorizer can tell (authz.EscalationChecker). Writes of the apiserver itself carry no user.
func (s *Server) preventEscalation(ctx context.Context, a *Attributes) error {
	if s.opts.Auth == nil || a.Kind.GVK.Group != rbacv1.GroupName {
		return nil
	}
	ec, ok := s.opts.Auth.Authorizer.(authz.EscalationChecker)
	u, hasUser := authn.UserFrom(ctx)
	if !ok || !hasUser {
		return nil
	}
	return ec.CheckEscalation(u, a.Verb, a.Object, a.OldObject)
}

// EnsureBootstrapPolicy creates the default ClusterRoles and bindings that are missing; existing
// ones are left as an administrator may have changed them.
func (s *Server) EnsureBootstrapPolicy(ctx context.Context) error {
	for _, obj := range authz.BootstrapPolicy() {
		k, ok := schemas.ByGVK(obj.GetObjectKind().GroupVersionKind())
		if !ok {
			return apierrors.NewInternalError(errors.New("bootstrap policy: unserved kind"))
		}
		_, err := s.createObject(ctx, k, "", obj, writeOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			name := ""
			if m, merr := meta.Accessor(obj); merr == nil {
				name = m.GetName()
			}
			return fmt.Errorf("bootstrap %s %s: %w", k.GVK.Kind, name, err)
		}
	}
	return nil
}
