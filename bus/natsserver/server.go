// Package natsserver runs an embedded NATS server with JetStream enabled.
package natsserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Config describes an embedded server.
type Config struct {
	// DataDir holds the JetStream file store (in DataDir/jetstream). "" keeps
	// it in a private temporary directory removed on Shutdown: use memory
	// streams there (tests).
	DataDir string
	// Host to listen on; default 127.0.0.1.
	Host string
	// Port: 0 = no listener (in-process connections only), -1 = random port.
	Port int
	// ServerName; default "skiff".
	ServerName string
	// Log enables the server's own logging to stderr.
	Log bool
	// ReadyTimeout bounds the wait for the server to accept connections; default 10s.
	ReadyTimeout time.Duration
	// Cluster joins this server to a NATS cluster (cluster.go); zero = standalone.
	Cluster ClusterConfig
	// Auth secures the server (operator and account JWTs, auth.go); nil = no authentication.
	Auth *Auth
	// SyncAlways fsyncs every write before JetStream acknowledges it (nats-server's
	// sync_always), one write at a time. Without it the server syncs every 2 minutes, and a
	// power cut loses what it acknowledged since, unless the writer syncs (StreamSync).
	SyncAlways bool
	// MaxFileStore bounds JetStream's file storage; 0 = nats-server's default, 75% of the disk
	// free at start, a limit that refuses every write, deletes too, once reached.
	MaxFileStore int64
}

// Server is a running embedded NATS server.
type Server struct {
	ns     *server.Server
	cfg    Config
	tmpDir string

	mu    sync.Mutex
	syncs []*StreamSync // closed on Shutdown
}

// MaxPayload is the largest message the embedded server accepts; an external cluster needs
// `max_payload` at least this large for big API replies.
const MaxPayload = 16 << 20

// Start starts the server and waits until it accepts connections.
func Start(cfg Config) (*Server, error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.ServerName == "" {
		cfg.ServerName = "skiff"
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 10 * time.Second
	}
	s := &Server{cfg: cfg}
	storeDir := cfg.DataDir
	if storeDir == "" {
		d, err := os.MkdirTemp("", "skiff-nats-")
		if err != nil {
			return nil, err
		}
		s.tmpDir, storeDir = d, d
	} else if err := os.MkdirAll(storeDir, 0o700); err != nil {
		return nil, err
	}
	opts := &server.Options{
		ServerName: cfg.ServerName,
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		// The server appends "jetstream" to StoreDir itself.
		StoreDir:   storeDir,
		NoSigs:     true,
		NoLog:      !cfg.Log,
		DontListen: cfg.Port == 0,
		// API replies (a list of thousands of Nodes) outgrow NATS's 1 MiB default.
		MaxPayload:        MaxPayload,
		JetStreamMaxStore: cfg.MaxFileStore,
	}
	opts.SyncAlways = cfg.SyncAlways
	if cfg.Port == 0 {
		opts.Port = -1 // unused without a listener, but 0 would mean the default port
	}
	if err := cfg.Cluster.apply(opts, cfg); err != nil {
		s.cleanup()
		return nil, err
	}
	if cfg.Auth != nil {
		if err := cfg.Auth.configure(opts); err != nil {
			s.cleanup()
			return nil, fmt.Errorf("natsserver: auth: %w", err)
		}
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		s.cleanup()
		return nil, fmt.Errorf("natsserver: %w", err)
	}
	if cfg.Log {
		ns.ConfigureLogger()
	}
	s.ns = ns
	go ns.Start()
	if !ns.ReadyForConnections(cfg.ReadyTimeout) {
		ns.Shutdown()
		ns.WaitForShutdown()
		s.cleanup()
		return nil, errors.New("natsserver: not ready for connections in time")
	}
	if !ns.JetStreamEnabled() {
		s.Shutdown()
		return nil, errors.New("natsserver: JetStream did not start")
	}
	return s, nil
}

// NATS gives access to the underlying server (monitoring, tests).
func (s *Server) NATS() *server.Server { return s.ns }

// StoreDir is where the JetStream files live.
func (s *Server) StoreDir() string {
	d := s.cfg.DataDir
	if d == "" {
		d = s.tmpDir
	}
	return filepath.Join(d, server.JetStreamStoreDir)
}

// ClientURL is the nats:// URL clients dial; "" for an in-process-only server.
func (s *Server) ClientURL() string {
	if s.cfg.Port == 0 {
		return ""
	}
	return s.ns.ClientURL()
}

// Connect opens a client connection: in-process when the server has no
// listener, over TCP otherwise.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	if s.cfg.Port == 0 {
		return nats.Connect("", append([]nats.Option{nats.InProcessServer(s.ns)}, opts...)...)
	}
	return nats.Connect(s.ns.ClientURL(), opts...)
}

// Shutdown stops the server and waits until it has stopped.
func (s *Server) Shutdown() {
	s.mu.Lock()
	for _, y := range s.syncs {
		_ = y.Close()
	}
	s.mu.Unlock()
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	s.cleanup()
}

func (s *Server) cleanup() {
	if s.tmpDir != "" {
		_ = os.RemoveAll(s.tmpDir)
	}
}
