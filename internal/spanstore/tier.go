package spanstore

import "strings"

// AttrUser names the authenticated caller on an API request span.
const AttrUser = "enduser.id"

// tier ranks a trace for eviction: the store drops the lowest tier first.
type tier int

const (
	tierRead       tier = iota // only API reads: a `get`, a `list`
	tierBackground             // heartbeats, status writes, components' own work
	tierUser                   // a user's write, or a `skiff apply`
	tiers
)

// tier is what span says of its trace. Only top-level spans (their parent not held: a root,
// or a child of a span in another process) speak; a trace takes the highest tier any of
// them gives, so a rollout stays a user's trace when its controllers' spans arrive.
func (s Span) tier(parentHeld bool) tier {
	switch {
	case s.Name == RootApply:
		return tierUser
	case parentHeld || s.isRead():
		return tierRead
	case s.isWrite() && !s.isHeartbeat() && !isComponent(s.Attributes[AttrUser]):
		return tierUser
	}
	return tierBackground
}

// isHeartbeat: a lease renewal or a status write, what nodes and controllers repeat all day.
func (s Span) isHeartbeat() bool {
	return s.Attributes[AttrResource] == "leases" || s.Attributes[AttrSubresource] == "status"
}

// isComponent: a control-plane component or a node (system:node:<name>), not a person.
// system:admin is the NATS admin a person uses from the CLI.
func isComponent(user string) bool {
	return strings.HasPrefix(user, "system:") && user != "system:admin"
}
