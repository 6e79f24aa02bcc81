package identity

import (
	"fmt"

	"github.com/skiff-sh/skiff/bus/natsserver"
)

// Names are the JetStream names the permissions cover; zero fields take the defaults of
// bus/statelog ("STATE", "state") and bus/lease ("leases").
type Names struct {
	Stream      string
	Prefix      string
	LeaseBucket string
}

func (n Names) withDefaults() Names {
	if n.Stream == "" {
		n.Stream = "STATE"
	}
	if n.Prefix == "" {
		n.Prefix = "state"
	}
	if n.LeaseBucket == "" {
		n.LeaseBucket = "leases"
	}
	return n
}

const jsAPI = "$JS.API."

// readStream lets a client open stream and replay it through consumers of any name: for the
// lease bucket's watch, used by the scheduler and controller-manager only.
func readStream(stream string) []string {
	return []string{
		jsAPI + "STREAM.INFO." + stream,
		jsAPI + "CONSUMER.CREATE." + stream + ".>",
		jsAPI + "CONSUMER.INFO." + stream + ".*",
		jsAPI + "CONSUMER.DELETE." + stream + ".*",
		jsAPI + "CONSUMER.MSG.NEXT." + stream + ".*",
	}
}

// ConsumerBudget is how many consumers of the state stream one identity may hold at once:
// NATS permissions grant each identity exactly this many consumer names. JetStream's own
// consumer limits are per account (shared by every identity), so this is what keeps one node
// from filling the stream's consumers and locking everyone else out.
const ConsumerBudget = 4

// ConsumerNames are the names id's readers of the state stream may give their consumers
// (statelog.Config.ConsumerNames); nil for the apiserver, which may use any.
func (id ID) ConsumerNames() []string {
	if id.Role == APIServer {
		return nil
	}
	names := make([]string, ConsumerBudget)
	for i := range names {
		names[i] = fmt.Sprintf("%s_view%d", id.token(), i)
	}
	return names
}

// readStreamAs lets id read stream through its own consumer names only: it can create no
// more consumers than it has names, and read from, look at or delete no one else's.
func (id ID) readStreamAs(stream string) []string {
	// A message get (answered by the stream's leader) tells a filtered view whether any message
	// of its kinds lies between its revision and one it must reach (statelog's reach); its
	// consumers may read every subject already, so it grants nothing new.
	out := []string{jsAPI + "STREAM.INFO." + stream, jsAPI + "STREAM.MSG.GET." + stream}
	for _, name := range id.ConsumerNames() {
		c := stream + "." + name
		out = append(out, jsAPI+"CONSUMER.CREATE."+c, jsAPI+"CONSUMER.CREATE."+c+".>",
			jsAPI+"CONSUMER.INFO."+c, jsAPI+"CONSUMER.DELETE."+c, jsAPI+"CONSUMER.MSG.NEXT."+c)
	}
	return out
}

// Per-connection limits of every identity but the apiserver's (NATS enforces these per user
// connection; JetStream's limits are per account): subscriptions, and the largest message.
const (
	MaxSubscriptions = 256
	MaxPayload       = natsserver.MaxPayload
)

// Permissions are what id may publish and subscribe to. The apiserver is unrestricted inside
// the account: it owns the log. Everyone else reads the log, never writes it, and may publish
// requests only on its own API subject.
func (id ID) Permissions(n Names) (natsserver.Permissions, error) {
	if err := id.Validate(); err != nil {
		return natsserver.Permissions{}, err
	}
	if id.Role == APIServer {
		return natsserver.Permissions{}, nil
	}
	n = n.withDefaults()
	p := natsserver.Permissions{
		PubAllow: append(id.readStreamAs(n.Stream), id.APISubject()),
		SubAllow: []string{id.InboxPrefix() + ".>"},
		// Redundant with the allow list, stated so a future grant cannot open them by accident.
		PubDeny: []string{
			n.Prefix + ".>",
			jsAPI + "STREAM.CREATE." + n.Stream,
			jsAPI + "STREAM.UPDATE." + n.Stream,
			jsAPI + "STREAM.DELETE." + n.Stream,
			jsAPI + "STREAM.PURGE." + n.Stream,
			jsAPI + "STREAM.MSG.DELETE." + n.Stream,
		},
		Limits: natsserver.Limits{Subs: MaxSubscriptions, Payload: MaxPayload},
	}
	switch id.Role {
	case Scheduler, ControllerManager:
		// Leader election: read and write leases, nothing else of the bucket's stream.
		kv := "KV_" + n.LeaseBucket
		p.PubAllow = append(p.PubAllow, readStream(kv)...)
		p.PubAllow = append(p.PubAllow,
			jsAPI+"INFO",              // creating a bucket first checks the account
			jsAPI+"STREAM.CREATE."+kv, // lease.New is idempotent on an existing bucket
			"$JS.FC."+kv+".>",         // flow control of the watch's push consumer
			jsAPI+"STREAM.MSG.GET."+kv,
			jsAPI+"DIRECT.GET."+kv+".>",
			"$KV."+n.LeaseBucket+".>",
		)
	case Node:
		// The apiserver calls the node for exec, usage and sessions (logs are one); the node answers
		// on the request's reply subject (Respond). A session's frames flow on the node's own
		// subjects only, so a node can neither read nor feed another node's sessions.
		p.SubAllow = append(p.SubAllow, NodeSubject(id.Node, "exec"), NodeSubject(id.Node, "metrics"),
			NodeSubject(id.Node, "open"), NodeSubject(id.Node, SessionToNode+".*"))
		p.PubAllow = append(p.PubAllow, NodeSubject(id.Node, SessionFromNode+".*"))
		p.Respond = true
	}
	return p, nil
}
