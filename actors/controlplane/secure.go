package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/natsserver"
)

// Secured NATS (Config.NATSAuthDir, Config.NATSCreds): every component connects as its own
// user; only the apiserver's may write the state log, the others read it and call the API on
// their own subject, which names them to the apiserver.

// NATSKeysDir is where, under a data dir, `skiff up` keeps the NATS operator and account keys.
const NATSKeysDir = "nats-auth"

// natsSecurity holds what a secured control plane needs beyond its main connection.
type natsSecurity struct {
	auth *natsserver.Auth // embedded secured server; nil otherwise

	mu      sync.Mutex
	clients map[identity.Role]*apiclient.Client
	conns   []*nats.Conn
}

// processIdentity is who this process is on NATS: the apiserver when it runs one, else the
// single kind of component it runs (one credentials file, one identity).
func (c Config) processIdentity() (identity.ID, error) {
	if c.Runs(APIServer) {
		return identity.ID{Role: identity.APIServer}, nil
	}
	sched, ctrls := c.Runs(Scheduler), len(c.controllerNames()) > 0
	switch {
	case sched && !ctrls:
		return identity.ID{Role: identity.Scheduler}, nil
	case ctrls && !sched:
		return identity.ID{Role: identity.ControllerManager}, nil
	}
	return identity.ID{}, errors.New("components: on secured NATS a process without the apiserver runs either the scheduler or controllers, not both (one identity per credentials file)")
}

// connect opens the main connection: to an embedded server (secured with NATSAuthDir) or to
// NATSURL (with NATSCreds). It returns the identity the connection has.
func (cp *ControlPlane) connect() (identity.ID, error) {
	cfg := cp.cfg
	id := identity.ID{Role: identity.APIServer}
	if cfg.NATSURL == "" {
		if cfg.NATSCreds != "" {
			return id, errors.New("NATSCreds: credentials are for an external NATS (NATSURL); the embedded server is secured with NATSAuthDir")
		}
		nc := natsserver.Config{Port: cfg.NATSPort, ServerName: "skiff"}
		if cfg.DataDir != "" {
			if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
				return id, err
			}
			lock, err := lockDataDir(cfg.DataDir)
			if err != nil {
				return id, err
			}
			cp.dataLock = lock
			nc.DataDir = filepath.Join(cfg.DataDir, "nats")
			if nc.MaxFileStore, err = storeLimit(cfg.DataDir); err != nil {
				return id, err
			}
		}
		cp.natsSec = &natsSecurity{clients: map[identity.Role]*apiclient.Client{}}
		if cfg.NATSAuthDir != "" {
			auth, err := natsserver.LoadAuth(cfg.NATSAuthDir)
			if err != nil {
				return id, err
			}
			nc.Auth, cp.natsSec.auth = auth, auth
		}
		var err error
		if cp.NATS, err = natsserver.Start(nc); err != nil {
			return id, fmt.Errorf("embedded NATS: %w", err)
		}
		if cp.natsSec.auth == nil {
			cp.Conn, err = cp.NATS.Connect(nats.Name("skiff-control-plane"))
		} else {
			cp.Conn, err = identity.Connect(cp.NATS, cp.natsSec.auth, id, identity.Names{}, nats.Name("skiff-control-plane"))
		}
		return id, err
	}
	if cfg.NATSAuthDir != "" {
		return id, errors.New("NATSAuthDir secures the embedded server; with NATSURL give NATSCreds")
	}
	opts := []nats.Option{nats.Name("skiff-control-plane"), nats.MaxReconnects(-1)}
	if cfg.NATSCreds != "" {
		var err error
		if id, err = cfg.processIdentity(); err != nil {
			return id, err
		}
		opts = append(append(opts, id.ClientOptions()...), nats.UserCredentials(cfg.NATSCreds))
	}
	var err error
	if cp.Conn, err = dialNATS(cfg.NATSURL, opts); err != nil {
		return id, fmt.Errorf("connect %s: %w", cfg.NATSURL, err)
	}
	return id, nil
}

// clientFor is the API client component role calls through: its own user and subject on a
// secured embedded server (in process when the apiserver is, apiTransport), else the
// process's client.
func (cp *ControlPlane) clientFor(role identity.Role) (*apiclient.Client, error) {
	if cp.natsSec == nil || cp.natsSec.auth == nil {
		return cp.Client, nil
	}
	s := cp.natsSec
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[role]; ok {
		return c, nil
	}
	id := identity.ID{Role: role}
	var nc *nats.Conn
	if cp.API == nil {
		var err error
		if nc, err = identity.Connect(cp.NATS, s.auth, id, identity.Names{}, nats.Name("skiff-"+string(role))); err != nil {
			return nil, fmt.Errorf("%s: connect to NATS: %w", role, err)
		}
		s.conns = append(s.conns, nc)
	}
	c := &apiclient.Client{T: cp.apiTransport(nc, id)}
	s.clients[role] = c
	return c, nil
}

func (s *natsSecurity) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, nc := range s.conns {
		nc.Close()
	}
	s.conns, s.clients = nil, map[identity.Role]*apiclient.Client{}
}

// Secured reports whether the embedded NATS server requires credentials.
func (cp *ControlPlane) Secured() bool { return cp.natsSec != nil && cp.natsSec.auth != nil }

// NodeCreds mints the credentials of node agent node (a .creds file) for the secured embedded
// server: it may read the log, call the API as system:node:<node> and serve its node API.
func (cp *ControlPlane) NodeCreds(node string) ([]byte, error) {
	return cp.Creds(identity.NodeID(node))
}

// Creds mints the credentials of any identity (e.g. a scheduler replica elsewhere).
func (cp *ControlPlane) Creds(id identity.ID) ([]byte, error) {
	if !cp.Secured() {
		return nil, errors.New("NATS is not secured: no credentials are needed")
	}
	return identity.Creds(cp.natsSec.auth, id, identity.Names{})
}

// ConnectNode opens an in-process connection as node agent node (`skiff up` runs its agent
// so); without natsSecurity it is a plain connection. The caller closes it.
func (cp *ControlPlane) ConnectNode(node string) (*nats.Conn, error) {
	if cp.NATS == nil {
		return nil, errors.New("no embedded NATS server")
	}
	id := identity.NodeID(node)
	if !cp.Secured() {
		return cp.NATS.Connect(nats.Name("skiff-agent-" + node))
	}
	return identity.Connect(cp.NATS, cp.natsSec.auth, id, identity.Names{}, nats.Name("skiff-agent-"+node))
}
