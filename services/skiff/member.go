package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/statelog"
)

// member is a process that joins a running control plane through its NATS: it reads the state
// log and runs actors, but serves no API.
type member struct {
	ctx    context.Context
	nc     *nats.Conn
	log    *statelog.Log
	actors *actorkit.System
	close  func()
}

// natsAuth is who a member is on NATS: its credentials (a file, or an option minted here;
// neither = none) and identity.
type natsAuth struct {
	creds string
	user  nats.Option
	id    identity.ID
}

// join connects to natsURL (as auth, if given), opens the state log read-only (only the
// apiserver creates and writes it) and starts an actor system; the context ends on
// SIGINT/SIGTERM.
func join(parent context.Context, natsURL, name string, auth ...natsAuth) (*member, error) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1)}
	for _, a := range auth {
		// The private inbox is needed even without credentials: a secured server may still
		// be reached, and it costs nothing otherwise.
		opts = append(opts, a.id.ClientOptions()...)
		if a.creds != "" {
			opts = append(opts, nats.UserCredentials(a.creds))
		}
		if a.user != nil {
			opts = append(opts, a.user)
		}
	}
	nc, err := nats.Connect(natsURL, opts...)
	if err != nil {
		stop()
		return nil, fmt.Errorf("connect %s: %w", natsURL, err)
	}
	log, err := statelog.Open(ctx, nc, statelog.Config{ReadOnly: true})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		err = fmt.Errorf("no state log on %s: start the control plane first (%w)", natsURL, err)
	}
	if err != nil {
		nc.Close()
		stop()
		return nil, err
	}
	actors := actorkit.NewSystem()
	return &member{ctx: ctx, nc: nc, log: log, actors: actors, close: func() {
		actors.Shutdown()
		_ = log.Close()
		nc.Close()
		stop()
	}}, nil
}
