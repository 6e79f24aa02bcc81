// Package natsservertest starts an embedded NATS server for a test.
package natsservertest

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/skiff-sh/skiff/bus/natsserver"
)

// Start runs a server on a free port with its data in the test's temp dir and returns it with
// a connection; both end with the test.
func Start(t testing.TB) (*natsserver.Server, *nats.Conn) {
	t.Helper()
	s, err := natsserver.Start(natsserver.Config{DataDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return s, nc
}
