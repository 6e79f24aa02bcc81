package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/identity/identitytest"
	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/bus/statelog"
)

// `skiff nats-creds --node` mints, from the keys alone, credentials the running server accepts
// for that node and no other.
func TestNATSCredsMintsNodeCredentials(t *testing.T) {
	dataDir := t.TempDir()
	auth, err := natsserver.LoadAuth(filepath.Join(dataDir, controlplane.NATSKeysDir))
	if err != nil {
		t.Fatal(err)
	}
	srv, _, apiConn := identitytest.StartServer(t, natsserver.Config{Port: -1, Auth: auth})
	l, err := statelog.Open(context.Background(), apiConn, statelog.Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	var out bytes.Buffer
	cmd := newNATSCreds()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--data-dir", dataDir, "--node", "n1"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	v := &identitytest.Violations{}
	nc, err := nats.Connect(srv.ClientURL(), append(identity.NodeID("n1").ClientOptions(),
		nats.UserCredentials(identitytest.WriteCreds(t, out.Bytes())), v.Option())...)
	if err != nil {
		t.Fatalf("the minted credentials: %v", err)
	}
	defer nc.Close()
	rl, err := statelog.Open(context.Background(), nc, statelog.Config{ReadOnly: true, ConsumerNames: identity.NodeID("n1").ConsumerNames()})
	if err != nil {
		t.Fatalf("node n1 reads the log: %v", err)
	}
	rl.Close()
	if err := nc.Publish(identity.NodeID("n2").APISubject(), nil); err != nil {
		t.Fatal(err)
	}
	v.Wait(t, identity.NodeID("n2").APISubject())

	for _, args := range [][]string{
		{"--data-dir", dataDir, "--node", "Bad_Name"},
		{"--data-dir", t.TempDir(), "--node", "n1"},
		{"--data-dir", dataDir, "--role", "scheduler", "--node", "n1"},
	} {
		cmd := newNATSCreds()
		out.Reset()
		cmd.SetOut(&out)
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(args)
		if err := cmd.Execute(); err == nil || strings.Contains(out.String(), "NATS USER JWT") || !strings.Contains(err.Error(), "--") {
			t.Errorf("%v: err %v; want an error naming the flag and no credentials", args, err)
		}
	}
}
