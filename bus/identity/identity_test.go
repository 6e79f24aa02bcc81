package identity_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/identity/identitytest"
	"github.com/skiff-sh/skiff/bus/lease"
	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/bus/statelog"
)

func TestAPISubjectRoundTrip(t *testing.T) {
	for _, id := range []identity.ID{
		identity.NodeID("node-a"), identity.NodeID("n1.example.com"),
		{Role: identity.Scheduler}, {Role: identity.ControllerManager}, {Role: identity.Admin}, {Role: identity.APIServer},
	} {
		got, err := identity.FromAPISubject(id.APISubject())
		if err != nil || got != id {
			t.Errorf("FromAPISubject(%q) = %+v, %v; want %+v", id.APISubject(), got, err, id)
		}
	}
	for _, s := range []string{"skiff.api.node_", "skiff.api.nobody", "skiff.api.apiserver", "skiff.api.node_a.b", "skiff.apix", "other"} {
		if id, err := identity.FromAPISubject(s); err == nil {
			t.Errorf("FromAPISubject(%q) = %+v, want an error", s, id)
		}
	}
	if err := identity.NodeID("Bad_Name").Validate(); err == nil || !strings.Contains(err.Error(), "Bad_Name") {
		t.Errorf("Validate of a bad node name: %v, want an error naming it", err)
	}
}

type securedServer struct {
	srv  *natsserver.Server
	auth *natsserver.Auth
	log  *statelog.Log // the apiserver's
	nc   *nats.Conn    // the apiserver's connection
}

func startSecured(t *testing.T, dir string) *securedServer {
	t.Helper()
	auth, err := natsserver.LoadAuth(filepath.Join(dir, "auth"))
	if err != nil {
		t.Fatal(err)
	}
	srv, _, nc := identitytest.StartServer(t, natsserver.Config{DataDir: filepath.Join(dir, "nats"), Port: -1, Auth: auth})
	l, err := statelog.Open(context.Background(), nc, statelog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &securedServer{srv: srv, auth: auth, log: l, nc: nc}
}

// connectCreds dials like a remote agent: TCP with a .creds file.
func connectCreds(t *testing.T, s *securedServer, id identity.ID, v *identitytest.Violations) *nats.Conn {
	t.Helper()
	creds, err := identity.Creds(s.auth, id, identity.Names{})
	if err != nil {
		t.Fatal(err)
	}
	opts := append(id.ClientOptions(), nats.UserCredentials(identitytest.WriteCreds(t, creds)), v.Option())
	nc, err := nats.Connect(s.srv.ClientURL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func TestAgentCannotWriteTheLog(t *testing.T) {
	ctx := context.Background()
	s := startSecured(t, t.TempDir())
	if _, err := s.log.Create(ctx, "pods/default/p1", []byte(`{"a":1}`), nil); err != nil {
		t.Fatal(err)
	}
	v := &identitytest.Violations{}
	nc := connectCreds(t, s, identity.NodeID("node-a"), v)

	// The agent reads and watches the log read-only.
	rl, err := statelog.Open(ctx, nc, statelog.Config{ReadOnly: true, ConsumerNames: identity.NodeID("node-a").ConsumerNames()})
	if err != nil {
		t.Fatalf("read-only open with node credentials: %v", err)
	}
	defer rl.Close()
	if _, err := rl.Get(ctx, "pods/default/p1", statelog.ReadOptions{}); err != nil {
		t.Fatalf("agent reads the log: %v", err)
	}
	w, err := rl.Watch(ctx, "pods/", statelog.WatchOptions{FromRev: rl.Rev()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := s.log.Create(ctx, "pods/default/p2", []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.Events():
		if ev.Key != "pods/default/p2" {
			t.Fatalf("watch event %+v, want p2", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("agent's watch saw no event")
	}
	if _, err := rl.Update(ctx, "pods/default/p1", []byte(`{}`), 0, nil); !errors.Is(err, statelog.ErrReadOnly) {
		t.Fatalf("Update on a read-only log: %v, want ErrReadOnly", err)
	}

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	before := identitytest.StreamState(t, nc)
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := js.Publish(short, "state.k.pods.default.p1", []byte(`{"evil":true}`)); err == nil {
		t.Fatal("a JetStream publish to the log with node credentials succeeded")
	}
	v.Wait(t, "state.k.pods.default.p1")
	for _, subj := range []string{"$JS.API.STREAM.PURGE.STATE", "$JS.API.STREAM.DELETE.STATE", "$JS.API.STREAM.UPDATE.STATE", "$JS.API.STREAM.MSG.DELETE.STATE"} {
		if err := nc.Publish(subj, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		v.Wait(t, subj)
	}
	if after := identitytest.StreamState(t, nc); after.LastSeq != before.LastSeq || after.Msgs != before.Msgs {
		t.Fatalf("the log changed under node credentials: %+v -> %+v", before, after)
	}

	// API subjects of other identities are closed; its own is open (nobody serves it here, so
	// the request ends in no responders rather than a violation).
	for _, subj := range []string{identity.NodeID("node-b").APISubject(), "skiff.api.admin", identity.APIPrefix, "skiff.api.scheduler"} {
		if err := nc.Publish(subj, nil); err != nil {
			t.Fatal(err)
		}
		v.Wait(t, subj)
	}
	if _, err := nc.Request(identity.NodeID("node-a").APISubject(), nil, 2*time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("request on its own API subject: %v, want no responders", err)
	}
	// Only its own node API subjects are open for subscribing.
	if _, err := nc.SubscribeSync(identity.NodeSubject("node-b", "exec")); err != nil {
		t.Fatal(err)
	}
	v.Wait(t, identity.NodeSubject("node-b", "exec"))
	if _, err := nc.SubscribeSync("_INBOX.>"); err != nil {
		t.Fatal(err)
	}
	v.Wait(t, "_INBOX.>")
	// Interactive sessions: another node's frames can be neither read nor forged.
	for _, subj := range []string{identity.NodeSubject("node-b", identity.SessionToNode+".s1"), identity.NodeSubject("node-b", identity.SessionFromNode+".s1")} {
		if _, err := nc.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
		v.Wait(t, subj)
	}
	forged := identity.NodeSubject("node-b", identity.SessionFromNode+".s1")
	if err := nc.Publish(forged, nil); err != nil {
		t.Fatal(err)
	}
	v.Wait(t, forged)
	// Its own are open: no violation arrives before the reply to a flush.
	if _, err := nc.SubscribeSync(identity.NodeSubject("node-a", identity.SessionToNode+".s1")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(identity.NodeSubject("node-a", identity.SessionFromNode+".s1"), nil); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("own session subjects: %v", err)
	}
	if strings.Contains(v.String(), "node-a.s") {
		t.Fatalf("violations on its own session subjects: %s", v)
	}
}

func TestCredentialsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	s := startSecured(t, dir)
	creds, err := identity.Creds(s.auth, identity.NodeID("node-a"), identity.Names{})
	if err != nil {
		t.Fatal(err)
	}
	s.log.Close()
	s.srv.Shutdown()
	for _, f := range []string{"operator.nk", "account.nk", "system.nk"} {
		fi, err := os.Stat(filepath.Join(dir, "auth", f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v; want 0600", f, err, fi.Mode())
		}
	}
	s2 := startSecured(t, dir)
	nc, err := nats.Connect(s2.srv.ClientURL(), append(identity.NodeID("node-a").ClientOptions(), nats.UserCredentials(identitytest.WriteCreds(t, creds)))...)
	if err != nil {
		t.Fatalf("credentials minted before the restart: %v", err)
	}
	defer nc.Close()
	rl, err := statelog.Open(context.Background(), nc, statelog.Config{ReadOnly: true, ConsumerNames: identity.NodeID("node-a").ConsumerNames()})
	if err != nil {
		t.Fatal(err)
	}
	rl.Close()

	// No credentials, or credentials of another operator: refused.
	if nc, err := nats.Connect(s2.srv.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("connected without credentials")
	}
	other, err := natsserver.LoadAuth(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	foreign, _ := identity.Creds(other, identity.ID{Role: identity.APIServer}, identity.Names{})
	if nc, err := nats.Connect(s2.srv.ClientURL(), nats.UserCredentials(identitytest.WriteCreds(t, foreign))); err == nil {
		nc.Close()
		t.Fatal("connected with another operator's credentials")
	}
}

// The scheduler and controller-manager elect leaders in the lease bucket with their own
// credentials; a node cannot touch the bucket.
func TestComponentsHoldLeases(t *testing.T) {
	s := startSecured(t, t.TempDir())
	for _, role := range []identity.Role{identity.Scheduler, identity.ControllerManager} {
		v := &identitytest.Violations{}
		nc := connectCreds(t, s, identity.ID{Role: role}, v)
		el, err := lease.New(context.Background(), nc, lease.Config{Memory: true})
		if err != nil {
			t.Fatalf("%s: lease bucket: %v (violations: %s)", role, err, v)
		}
		ctx, cancel := context.WithCancel(context.Background())
		led := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- el.Run(ctx, "skiff-"+string(role), string(role)+"-1", 2*time.Second, func(context.Context) { close(led) }, func() {})
		}()
		select {
		case <-led:
		case err := <-done:
			t.Fatalf("%s: election ended: %v (violations: %s)", role, err, v)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never led (violations: %s)", role, v)
		}
		cancel()
		<-done
	}
	v := &identitytest.Violations{}
	nc := connectCreds(t, s, identity.NodeID("node-a"), v)
	if err := nc.Publish("$KV.leases.skiff-scheduler", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	v.Wait(t, "$KV.leases.skiff-scheduler")
}
