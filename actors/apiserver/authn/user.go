// Package authn names who is calling the API. Authenticators (bearer token, client certificate,
// the NATS identity of an in-cluster component) put a User in the request context; the
// authorizer and admission read it from there.
package authn

import "context"

// User is an authenticated caller.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string // e.g. from Impersonate-Extra-<key> headers
	// Audiences the credential was accepted for, set by audience-aware authenticators
	// (ServiceAccount tokens); nil for the audience-agnostic ones.
	Audiences []string
}

// Well-known names, as in Kubernetes.
const (
	GroupMasters         = "system:masters"       // may do anything
	GroupNodes           = "system:nodes"         // node agents; further narrowed by NodeRestriction
	GroupAuthenticated   = "system:authenticated" // every authenticated caller
	NodeUserPrefix       = "system:node:"         // + node name
	Anonymous            = "system:anonymous"
	GroupServiceAccounts = "system:serviceaccounts" // every ServiceAccount (authn/serviceaccount)
)

type userKey struct{}

// WithUser returns ctx carrying u.
func WithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

type impersonatorKey struct{}

// WithImpersonator returns ctx recording that the request's User is acted as by u.
func WithImpersonator(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, impersonatorKey{}, u)
}

// ImpersonatorFrom returns who impersonates the request's User, if anyone does.
func ImpersonatorFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(impersonatorKey{}).(User)
	return u, ok
}

type audiencesKey struct{}

// WithAudiences returns ctx naming the audiences a token is being checked for (TokenReview's
// spec.audiences); an audience-aware token authenticator reads them with AudiencesFrom.
func WithAudiences(ctx context.Context, audiences []string) context.Context {
	return context.WithValue(ctx, audiencesKey{}, audiences)
}

// AudiencesFrom returns the audiences stored by WithAudiences.
func AudiencesFrom(ctx context.Context) []string {
	a, _ := ctx.Value(audiencesKey{}).([]string)
	return a
}

// UserFrom returns the caller stored by WithUser.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}

// InGroup reports whether u belongs to group.
func (u User) InGroup(group string) bool {
	for _, g := range u.Groups {
		if g == group {
			return true
		}
	}
	return false
}

// NodeName is the node a node agent's identity stands for ("" when u is not a node).
func (u User) NodeName() string {
	if len(u.Name) > len(NodeUserPrefix) && u.Name[:len(NodeUserPrefix)] == NodeUserPrefix && u.InGroup(GroupNodes) {
		return u.Name[len(NodeUserPrefix):]
	}
	return ""
}
