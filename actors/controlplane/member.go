package controlplane

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// NATSAuth is who a member is on NATS: its credentials (a file, or an option minted by the
// caller; neither = none) and identity.
type NATSAuth struct {
	Creds string
	User  nats.Option
	ID    identity.ID
}

// Member is a process that joins a running control plane through its NATS (a node agent,
// simulated nodes): it reads the state log through its own shared informers and runs actors,
// but serves no API.
type Member struct {
	Conn      *nats.Conn
	Log       *statelog.Log
	Actors    *actorkit.System
	Informers *informer.Factory // its actor runs as "informers"
}

// Reads narrows what a member keeps of the state log; the zero value keeps all of it.
type Reads struct {
	// Kinds are the only kinds its informers read (statelog.Config.Only): the log's other
	// kinds never reach the process. An informer of another kind panics.
	Kinds []*schemas.Kind
	// Untraced: it starts no traced work from what it reads, so it keeps no trace headers.
	Untraced bool
}

// MemberHistoryBytes bounds a member's event history: a watch resumes from it after a short
// stall; one that fell further behind relists from the (packed) live values, locally.
const MemberHistoryBytes = 2 << 20

// Join connects to natsURL (as auth, if given), opens the state log read-only (only the
// apiserver creates and writes it) and starts an actor system with the shared informers.
func Join(ctx context.Context, natsURL, name string, auth ...NATSAuth) (*Member, error) {
	return JoinReading(ctx, natsURL, name, Reads{}, auth...)
}

// JoinReading is Join keeping only what r says of the log.
func JoinReading(ctx context.Context, natsURL, name string, r Reads, auth ...NATSAuth) (*Member, error) {
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1)}
	// A member serves no API: its informers are the view's only readers. They decode each event
	// once and relist seldom, so the view packs its values; they watch from snapshots of their
	// own, so its history starts at Open and is short.
	logCfg := statelog.Config{ReadOnly: true, DropHeaders: r.Untraced, HistoryBytes: MemberHistoryBytes,
		HistoryFromOpen: true}
	for _, k := range r.Kinds {
		logCfg.Only = append(logCfg.Only, schemas.StoragePrefix(k, ""))
	}
	for _, a := range auth {
		// The view's consumer takes one of the names the identity's permissions grant.
		logCfg.ConsumerNames = a.ID.ConsumerNames()
		// The private inbox is needed even without credentials: a secured server may still
		// be reached, and it costs nothing otherwise.
		opts = append(opts, a.ID.ClientOptions()...)
		if a.Creds != "" {
			opts = append(opts, nats.UserCredentials(a.Creds))
		}
		if a.User != nil {
			opts = append(opts, a.User)
		}
	}
	nc, err := nats.Connect(natsURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", natsURL, err)
	}
	log, err := statelog.Open(ctx, nc, logCfg)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		err = fmt.Errorf("no state log on %s: start the control plane first (%w)", natsURL, err)
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	m := &Member{Conn: nc, Log: log, Actors: actorkit.NewSystem(), Informers: informer.NewFactory(log)}
	if _, err := m.Actors.Spawn(Informers, m.Informers.Actor()); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Close stops the actors, then the log and the connection.
func (m *Member) Close() {
	m.Actors.Shutdown()
	_ = m.Log.Close()
	m.Conn.Close()
}
