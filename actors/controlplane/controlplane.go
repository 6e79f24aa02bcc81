// Package controlplane assembles a Skiff process: the embedded (or external) NATS server, the
// state log, and the supervised actors. `skiff up`, `skiff server` and the tests all start
// Skiff through it, so they run the same thing.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/apiserver"
	"github.com/skiff-sh/skiff/actors/controllers"
	"github.com/skiff-sh/skiff/actors/scheduler"
	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/bus/statelog"
)

// Config says what to run.
type Config struct {
	DataDir      string // NATS JetStream store and kubeconfig; "" keeps everything in memory
	NATSURL      string // external NATS; "" starts an embedded server
	NATSPort     int    // embedded server's client port: 0 in-process only, -1 random
	Listen       string // apiserver HTTP address, e.g. 127.0.0.1:6443; "" = no HTTP
	ServiceCIDR  string
	Replicas     int           // state stream replicas (3 on a NATS cluster)
	Bookmarks    time.Duration // bookmark interval of watches
	CompactEvery time.Duration // how often history older than CompactKeep is compacted; 0 = never
	CompactKeep  time.Duration
	Logger       *slog.Logger
	// Components to run in this process; nil = all of them. Names: "apiserver", "scheduler",
	// and the controllers (controllers.All: "deployment", "replicaset", ...).
	Components []string
	// Controllers tunes the controllers (node grace period, eviction timeout, workers).
	Controllers controllers.Options
}

// Runs reports whether the named component runs in this process.
func (c Config) Runs(name string) bool {
	if c.Components == nil {
		return true
	}
	for _, n := range c.Components {
		if n == name {
			return true
		}
	}
	return false
}

// ControlPlane is a running Skiff control plane.
type ControlPlane struct {
	cfg      Config
	NATS     *natsserver.Server // nil when NATSURL was given
	Conn     *nats.Conn
	Log      *statelog.Log
	API      *apiserver.Server
	Actors   *actorkit.System
	Client   *apiclient.Client // in-cluster client over NATS
	pids     []*actorkit.PID   // spawned actors, stopped in reverse order
	listener net.Listener
	cancel   context.CancelFunc
}

// Start brings a control plane up and returns once the API answers.
func Start(ctx context.Context, cfg Config) (cp *ControlPlane, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// W3C trace context travels in NATS requests and is stored with every write.
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	cp = &ControlPlane{cfg: cfg}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	if cfg.NATSURL == "" {
		nc := natsserver.Config{Port: cfg.NATSPort, ServerName: "skiff"}
		if cfg.DataDir != "" {
			if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
				return nil, err
			}
			nc.DataDir = filepath.Join(cfg.DataDir, "nats")
		}
		if cp.NATS, err = natsserver.Start(nc); err != nil {
			return nil, fmt.Errorf("embedded NATS: %w", err)
		}
		if cp.Conn, err = cp.NATS.Connect(nats.Name("skiff-control-plane")); err != nil {
			return nil, err
		}
	} else if cp.Conn, err = nats.Connect(cfg.NATSURL, nats.Name("skiff-control-plane"), nats.MaxReconnects(-1)); err != nil {
		return nil, fmt.Errorf("connect %s: %w", cfg.NATSURL, err)
	}
	logCfg := statelog.Config{Replicas: cfg.Replicas, Memory: cfg.DataDir == "" && cfg.NATSURL == "", BookmarkInterval: cfg.Bookmarks}
	if cp.Log, err = statelog.Open(ctx, cp.Conn, logCfg); err != nil {
		return nil, fmt.Errorf("state log: %w", err)
	}
	if cp.API, err = apiserver.New(apiserver.Options{Log: cp.Log, ServiceCIDR: cfg.ServiceCIDR, NodeConn: cp.Conn}); err != nil {
		return nil, err
	}
	if err := cp.API.EnsureDefaultNamespaces(ctx); err != nil {
		return nil, fmt.Errorf("default namespaces: %w", err)
	}
	if cfg.Listen != "" {
		if cp.listener, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("apiserver listen: %w", err)
		}
	}
	cp.Actors = actorkit.NewSystem()
	if err := cp.spawn("apiserver", apiserver.NewActor(apiserver.ActorConfig{
		Server: cp.API, Listener: cp.listener, NATS: cp.Conn, Logger: cfg.Logger,
	})); err != nil {
		return nil, err
	}
	cp.Client = &apiclient.Client{T: apiclient.NATS{Conn: cp.Conn}}
	if cfg.Runs("scheduler") {
		if err := cp.spawn("scheduler", scheduler.NewActor(scheduler.Config{Log: cp.Log, Client: cp.Client})); err != nil {
			return nil, err
		}
	}
	var ctrls []string
	for _, name := range controllers.All {
		if cfg.Runs(name) {
			ctrls = append(ctrls, name)
		}
	}
	pids, err := controllers.Start(cp.Actors, controllers.Deps{Log: cp.Log, Client: cp.Client, Logger: cfg.Logger}, ctrls, cfg.Controllers)
	cp.pids = append(cp.pids, pids...)
	if err != nil {
		return nil, err
	}
	bg, cancel := context.WithCancel(context.Background())
	cp.cancel = cancel
	if cfg.CompactEvery > 0 {
		go cp.compactLoop(bg)
	}
	return cp, cp.waitReady(ctx)
}

func (cp *ControlPlane) spawn(name string, producer func() actorkit.Actor) error {
	pid, err := cp.Actors.Spawn(name, producer)
	if err != nil {
		return err
	}
	cp.pids = append(cp.pids, pid)
	return nil
}

// Actor returns the PID of a spawned actor by name ("apiserver", "scheduler", ...).
func (cp *ControlPlane) Actor(name string) *actorkit.PID {
	for _, pid := range cp.pids {
		if pid.Id == name {
			return pid
		}
	}
	return nil
}

// URL is the apiserver's HTTP base URL ("" without HTTP).
func (cp *ControlPlane) URL() string {
	if cp.listener == nil {
		return ""
	}
	return "http://" + cp.listener.Addr().String()
}

func (cp *ControlPlane) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		_, err := cp.Client.Raw(ctx, "GET", "/api/v1/namespaces/default", "", nil)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(errors.New("apiserver did not become ready"), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// compactLoop keeps the log's history bounded, like kube-apiserver's periodic etcd compaction:
// every CompactEvery it compacts to the revision that was current CompactKeep ago.
func (cp *ControlPlane) compactLoop(ctx context.Context) {
	type mark struct {
		at  time.Time
		rev uint64
	}
	var marks []mark
	t := time.NewTicker(cp.cfg.CompactEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			marks = append(marks, mark{now, cp.Log.Rev()})
			for len(marks) > 0 && now.Sub(marks[0].at) >= cp.cfg.CompactKeep {
				if err := cp.Log.Compact(ctx, marks[0].rev); err != nil {
					cp.cfg.Logger.Warn("compaction", "rev", marks[0].rev, "err", err)
				}
				marks = marks[1:]
			}
		}
	}
}

// Stop shuts everything down in reverse order.
func (cp *ControlPlane) Stop() {
	if cp.cancel != nil {
		cp.cancel()
	}
	if cp.Actors != nil {
		for i := len(cp.pids) - 1; i >= 0; i-- {
			cp.Actors.Stop(cp.pids[i])
		}
		cp.Actors.Shutdown()
	}
	if cp.listener != nil {
		_ = cp.listener.Close()
	}
	if cp.Log != nil {
		_ = cp.Log.Close()
	}
	if cp.Conn != nil {
		cp.Conn.Close()
	}
	if cp.NATS != nil {
		cp.NATS.Shutdown()
	}
}

// StartScratch runs a control plane with its store in a new temporary directory and the API on
// a random loopback port, for benchmarks; stop shuts it down and removes the directory.
func StartScratch(ctx context.Context, prefix string) (cp *ControlPlane, stop func(), err error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, nil, err
	}
	cp, err = Start(ctx, Config{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return cp, func() { cp.Stop(); os.RemoveAll(dir) }, nil
}
