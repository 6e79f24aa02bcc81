// Package authn names who is calling the API. Authenticators (bearer token, client certificate,
// the NATS identity of an in-cluster component) put a User in the request context; the
// authorizer and admission read it from there.
package authn

import "context"

// User is an authenticated caller.
type User struct {
	Name   string
	Groups []string
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
