package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"

	"github.com/skiff-sh/skiff/actors/actorkit"
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

// join connects to natsURL, opens the state log and starts an actor system; the context ends
// on SIGINT/SIGTERM.
func join(parent context.Context, natsURL, name string) (*member, error) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	nc, err := nats.Connect(natsURL, nats.Name(name), nats.MaxReconnects(-1))
	if err != nil {
		stop()
		return nil, fmt.Errorf("connect %s: %w", natsURL, err)
	}
	log, err := statelog.Open(ctx, nc, statelog.Config{})
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
