// Package identity names the components that talk over NATS, the subject each one calls the
// apiserver on, and the NATS permissions that keep each to its own part: only the apiserver
// writes the state log; the others read it and ask the apiserver, each under its own name.
package identity

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Role is the kind of component.
type Role string

const (
	APIServer         Role = "apiserver"
	Scheduler         Role = "scheduler"
	ControllerManager Role = "controller-manager"
	Node              Role = "node"
	Admin             Role = "admin"
)

// APIPrefix is the apiserver's request subject; a caller appends its identity
// (skiff.api.node.<node>, skiff.api.scheduler, ...). The bare prefix is the apiserver's own.
const APIPrefix = "skiff.api"

// ID is one component's identity; Node is set for Role Node only.
type ID struct {
	Role Role
	Node string
}

// NodeID is the identity of node agent name.
func NodeID(name string) ID { return ID{Role: Node, Node: name} }

// Validate checks the role and, for a node, that the name is a DNS subdomain (which also
// keeps NATS wildcards and spaces out of every subject built from it).
func (id ID) Validate() error {
	switch id.Role {
	case Node:
		if id.Node == "" {
			return errors.New("identity: node name is required")
		}
		if errs := validation.IsDNS1123Subdomain(id.Node); len(errs) > 0 {
			return fmt.Errorf("identity: node name %q: %s", id.Node, strings.Join(errs, "; "))
		}
		return nil
	case APIServer, Scheduler, ControllerManager, Admin:
		if id.Node != "" {
			return fmt.Errorf("identity: role %s has no node name", id.Role)
		}
		return nil
	}
	return fmt.Errorf("identity: unknown role %q", id.Role)
}

// token is the identity as one NATS subject token: node names have dots, which become "_"
// (never part of a DNS name, so the mapping is reversible).
func (id ID) token() string {
	if id.Role == Node {
		return "node_" + strings.ReplaceAll(id.Node, ".", "_")
	}
	return string(id.Role)
}

// String is the user name of the identity's NATS credentials.
func (id ID) String() string {
	if id.Role == Node {
		return "node:" + id.Node
	}
	return string(id.Role)
}

// APISubject is where id sends API requests.
func (id ID) APISubject() string {
	if id.Role == APIServer {
		return APIPrefix
	}
	return APIPrefix + "." + id.token()
}

// FromAPISubject returns who sent a request on subject; the NATS permissions guarantee that
// only that identity may publish there.
func FromAPISubject(subject string) (ID, error) {
	if subject == APIPrefix {
		return ID{Role: APIServer}, nil
	}
	tok, ok := strings.CutPrefix(subject, APIPrefix+".")
	if !ok || strings.Contains(tok, ".") {
		return ID{}, fmt.Errorf("identity: %q is not an API subject", subject)
	}
	var id ID
	if name, ok := strings.CutPrefix(tok, "node_"); ok {
		id = NodeID(strings.ReplaceAll(name, "_", "."))
	} else {
		id = ID{Role: Role(tok)}
	}
	if id.Role == APIServer {
		return ID{}, fmt.Errorf("identity: %q is not an API subject", subject)
	}
	return id, id.Validate()
}

// InboxPrefix is the identity's private reply subject space: no one else can subscribe there,
// so nobody reads another component's replies.
func (id ID) InboxPrefix() string { return "_INBOX_" + id.token() }

// NodeSubject is where node answers the node API method (log, exec, open).
func NodeSubject(node, method string) string { return "skiff.node." + node + "." + method }

// The subject tokens of a session's frames under NodeSubject: to the node, and from it.
const (
	SessionToNode   = "sin"
	SessionFromNode = "sout"
)
