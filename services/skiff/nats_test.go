package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/natsserver"
)

// `skiff nats --auth-dir` refuses anonymous clients and accepts credentials minted from the
// same keys, as `skiff nats-creds --keys-dir` mints them.
func TestNATSAuthDir(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	cfg, err := natsFlags{name: "n1", listen: "127.0.0.1:4222", dataDir: t.TempDir(), authDir: keys}.config()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Port = -1 // any free port
	srv, err := natsserver.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	if nc, err := nats.Connect(srv.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected to a secured server")
	}
	auth, err := natsserver.ReadAuth(keys)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := identity.Creds(auth, identity.ID{Role: identity.Scheduler}, identity.Names{})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "scheduler.creds")
	if err := os.WriteFile(file, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.UserCredentials(file))
	if err != nil {
		t.Fatalf("minted credentials refused: %v", err)
	}
	nc.Close()
}
