package apiserver

import (
	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/actors/apiserver/authz"
	"github.com/skiff-sh/skiff/bus/identity"
)

// AdminUser is the NATS admin identity (system:masters).
const AdminUser = "system:admin"

// wireUser is who sent a NATS request, from the identity in its subject. NATS permissions let
// only that identity publish there, so the subject authenticates the caller.
func wireUser(id identity.ID) authn.User {
	switch id.Role {
	case identity.Node:
		return authn.User{Name: authn.NodeUserPrefix + id.Node, Groups: []string{authn.GroupNodes, authn.GroupAuthenticated}}
	case identity.Scheduler:
		return authn.User{Name: authz.SchedulerUser, Groups: []string{authn.GroupAuthenticated}}
	case identity.ControllerManager:
		return authn.User{Name: authz.ControllerManagerUser, Groups: []string{authn.GroupAuthenticated}}
	}
	return authn.User{Name: AdminUser, Groups: []string{authn.GroupMasters, authn.GroupAuthenticated}}
}
