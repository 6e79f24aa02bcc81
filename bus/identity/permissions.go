package identity

import (
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

// readStream lets a client open stream and replay it through its own ordered consumers.
// Consumer names are random single tokens, so NATS cannot tie them to their creator; a
// consumer only reads, and ordered consumers recreate themselves if deleted.
func readStream(stream string) []string {
	return []string{
		jsAPI + "STREAM.INFO." + stream,
		jsAPI + "CONSUMER.CREATE." + stream + ".>",
		jsAPI + "CONSUMER.INFO." + stream + ".*",
		jsAPI + "CONSUMER.DELETE." + stream + ".*",
		jsAPI + "CONSUMER.MSG.NEXT." + stream + ".*",
	}
}

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
		PubAllow: append(readStream(n.Stream), id.APISubject()),
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
		// The apiserver calls the node for logs and exec; the node answers on the request's
		// reply subject (Respond) and may receive nothing else.
		p.SubAllow = append(p.SubAllow, NodeSubject(id.Node, "log"), NodeSubject(id.Node, "exec"))
		p.Respond = true
	}
	return p, nil
}
