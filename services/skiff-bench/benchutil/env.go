package benchutil

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/skiff-sh/skiff/bus/natsserver"
)

// ModuleRoot is the directory of the Go module the benchmark runs in: the benchmarks that
// build binaries build them from this tree.
func ModuleRoot(ctx context.Context) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if root == "." || root == "" {
		return "", errors.New("not inside the skiff module: run the bench from the repository")
	}
	return root, nil
}

// FreePort is a loopback TCP port nothing listens on right now.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Embedded is an embedded JetStream server with one client connection.
type Embedded struct {
	Server *natsserver.Server
	Conn   *nats.Conn
}

// StartEmbedded starts the server cfg describes and connects to it.
func StartEmbedded(cfg natsserver.Config) (*Embedded, error) {
	srv, err := natsserver.Start(cfg)
	if err != nil {
		return nil, err
	}
	nc, err := srv.Connect()
	if err != nil {
		srv.Shutdown()
		return nil, err
	}
	return &Embedded{Server: srv, Conn: nc}, nil
}

// Close closes the connection and stops the server.
func (e *Embedded) Close() {
	e.Conn.Close()
	e.Server.Shutdown()
}
