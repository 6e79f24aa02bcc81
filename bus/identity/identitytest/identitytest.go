// Package identitytest helps tests of secured NATS: a real secured server, credentials files
// and a recorder of the permission violations NATS reports to a connection.
package identitytest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/natsserver"
)

// StartServer starts a secured server (keys in a test directory unless cfg.Auth is set) and
// connects as the apiserver; both end with the test.
func StartServer(t testing.TB, cfg natsserver.Config) (*natsserver.Server, *natsserver.Auth, *nats.Conn) {
	t.Helper()
	if cfg.Auth == nil {
		auth, err := natsserver.LoadAuth(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		cfg.Auth = auth
	}
	srv, err := natsserver.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := identity.Connect(srv, cfg.Auth, identity.ID{Role: identity.APIServer}, identity.Names{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return srv, cfg.Auth, nc
}

// WriteCreds writes creds (a .creds file's content) to a test file and returns its path.
func WriteCreds(t testing.TB, creds []byte) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "user.creds")
	if err := os.WriteFile(file, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// Violations records the permission violations reported to one connection.
type Violations struct {
	mu   sync.Mutex
	errs []string
}

// Handler is the connection's nats.ErrorHandler.
func (v *Violations) Handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if errors.Is(err, nats.ErrPermissionViolation) {
		v.mu.Lock()
		v.errs = append(v.errs, err.Error())
		v.mu.Unlock()
	}
}

// Option installs Handler.
func (v *Violations) Option() nats.Option { return nats.ErrorHandler(v.Handler) }

func (v *Violations) String() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return fmt.Sprintf("%q", v.errs)
}

// Count is how many violations were reported.
func (v *Violations) Count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.errs)
}

func (v *Violations) seen(subject string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range v.errs {
		if strings.Contains(e, `"`+subject+`"`) {
			return true
		}
	}
	return false
}

// Wait fails the test unless NATS reports a violation on subject within 5 s.
func (v *Violations) Wait(t testing.TB, subject string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !v.seen(subject) {
		if time.Now().After(deadline) {
			t.Fatalf("no permissions violation for %s (got %s)", subject, v)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// StreamState is the state stream's state as nc sees it.
func StreamState(t testing.TB, nc *nats.Conn) jetstream.StreamState {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(context.Background(), "STATE")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}
