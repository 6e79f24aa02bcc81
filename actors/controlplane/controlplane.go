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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/apiserver"
	"github.com/skiff-sh/skiff/actors/controllers"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/actors/scheduler"
	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/lease"
	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/internal/tracing"
	"github.com/skiff-sh/skiff/schemas"
)

// Config says what to run.
type Config struct {
	DataDir     string // NATS JetStream store and kubeconfig; "" keeps everything in memory
	NATSURL     string // external NATS; "" starts an embedded server
	NATSPort    int    // embedded server's client port: 0 in-process only, -1 random
	Listen      string // apiserver HTTP address, e.g. 127.0.0.1:6443; "" = no HTTP
	ServiceCIDR string
	// NodePortRange is the apiserver's --service-node-port-range ("" = 30000-32767).
	NodePortRange string
	Replicas      int           // state stream replicas (3 on a NATS cluster)
	Bookmarks     time.Duration // bookmark interval of watches
	CompactEvery  time.Duration // how often history older than CompactKeep is compacted; 0 = never
	CompactKeep   time.Duration
	Logger        *slog.Logger
	// Components to run in this process; nil = all of them. Names: "apiserver", "scheduler",
	// "controller-manager" (every controller) and single controllers (controllers.All:
	// "deployment", "replicaset", ...). Without "apiserver" no API is served here (Listen is
	// ignored): the components reach an apiserver replica over NATS.
	Components []string
	// LeaderElect runs the scheduler and the controllers only while this process holds their
	// lease (SchedulerLease, ControllerManagerLease) in JetStream, so replicas can stand by;
	// log compaction likewise (CompactorLease). Off, they simply run.
	LeaderElect bool
	// LeaseDuration: a standby takes over at most this long after a leader died (default 15s).
	LeaseDuration time.Duration
	// Identity of this process in lease records; default hostname plus a random suffix.
	Identity string
	// Controllers tunes the controllers (node grace period, eviction timeout, workers).
	Controllers controllers.Options
	// APIAuth: HTTPS, authentication and RBAC on the apiserver (apiauth.go); off = plain HTTP
	// where every caller is system:masters (embedded and test mode).
	APIAuth APIAuth
	// APITimeouts of the apiserver's HTTP server; zero fields take apiserver's defaults.
	APITimeouts apiserver.Timeouts
	// NATSAuthDir secures the embedded server with operator/account keys kept here (created on
	// first start): each component connects as its own user (secure.go). "" = no auth.
	NATSAuthDir string
	// NATSCreds is this process's credentials file for the external NATSURL.
	NATSCreds string
	// EncryptionKeyFile holds the keys that seal Secrets in the state log (encryption.go);
	// made on first start. Default DataDir/encryption.keys on the embedded NATS; required on
	// an external one, where every apiserver replica must be given the same file.
	EncryptionKeyFile string
	// ServiceAccountIssuer is the iss of ServiceAccount tokens and the OIDC issuer URL
	// (default https://kubernetes.default.svc.cluster.local). ServiceAccountKeyFile is their
	// signing key, made on first start: default DataDir/service-account.key, or beside
	// EncryptionKeyFile on an external NATS, so the replicas given that file share it too.
	ServiceAccountIssuer  string
	ServiceAccountKeyFile string
	// ServiceAccountAdmission runs kube's ServiceAccount admission: pods get the `default`
	// account, one naming a missing account is refused; with AutomountServiceAccountTokens
	// they also get the token volume, whose token only an apiserver with APIAuth issues
	// (`skiff up` and `skiff server` turn it on with --api-auth).
	ServiceAccountAdmission       bool
	AutomountServiceAccountTokens bool
	// AdvertiseAddress is the IPv4 address pods reach this apiserver at, listed in the
	// `kubernetes` Service's endpoints (apiendpoints.go); default the Listen IP when specific,
	// else the host's default-route address. EndpointTTL: how long a silent replica stays
	// listed (default 15 s).
	AdvertiseAddress string
	EndpointTTL      time.Duration
	// RootCAFile is the CA (PEM) published as kube-root-ca.crt in every namespace; default the
	// API CA of this process (APIAuth). A controller-manager running apart needs it.
	RootCAFile string
	// Supervision is how every actor of this process is restarted; zero = actorkit.DefaultPolicy.
	Supervision actorkit.Policy
	// NoFsync (embedded server only) acknowledges writes before they are on disk: JetStream
	// then syncs every 2 minutes, and a power cut loses what it acknowledged since. By
	// default every write is fsynced before it is acknowledged, concurrent writes sharing
	// one fsync (natsserver.StreamSync).
	NoFsync bool
	// DiskMinFree and DiskReserve tune the guard of the embedded store's disk (diskspace.go):
	// growing writes are refused below DiskMinFree free, and DiskReserve is held back for
	// deletes; 0 = diskspace's defaults.
	DiskMinFree, DiskReserve uint64
	// CheckCacheMutations (tests) keeps a copy of every object the shared informers cache, so
	// Informers.Mutations can tell whether a component changed one it did not own, and of
	// every shared decode the apiserver reads (API.SharedMutations).
	CheckCacheMutations bool
}

// ControlPlane is a running Skiff control plane.
type ControlPlane struct {
	cfg    Config
	NATS   *natsserver.Server // nil when NATSURL was given
	Conn   *nats.Conn
	Log    *statelog.Log
	API    *apiserver.Server // nil when this process runs no apiserver
	Actors *actorkit.System
	// Informers is the process's shared informer cache: one per kind, read by every component.
	Informers *informer.Factory
	Client    *apiclient.Client // in-cluster client: in process with the apiserver here, else over NATS
	listener  net.Listener
	identity  string
	natsSec   *natsSecurity  // per-component NATS users; nil with an external NATS
	elector   *lease.Elector // nil without leader election
	apiAuth   *apiAuthState  // nil without Config.APIAuth
	dataLock  *dirLock       // the embedded store's data dir; nil in memory or with NATSURL

	mu      sync.Mutex
	pids    []*actorkit.PID // running actors, stopped in reverse order
	leading map[string]bool // lease names held (or parts running without election)

	bg      context.Context // ends on Stop; background parts run until then
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped atomic.Bool
}

// Start brings a control plane up and returns once the API answers (when this process runs
// the apiserver; other components keep retrying until a replica does).
func Start(ctx context.Context, cfg Config) (cp *ControlPlane, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	tracing.SetPropagator()
	if err := cfg.APIAuth.validate(); err != nil {
		return nil, err
	}
	if err := cfg.validateComponents(); err != nil {
		return nil, err
	}
	if cfg.NoFsync && cfg.NATSURL != "" {
		return nil, errors.New("NoFsync (--fsync=false): only the embedded NATS server is synced by Skiff; an external one syncs by its own setting (skiff nats --sync-always)")
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.Identity == "" {
		cfg.Identity = defaultIdentity()
	}
	if err := validIdentity(cfg.Identity); err != nil {
		return nil, err
	}
	cp = &ControlPlane{cfg: cfg, identity: cfg.Identity, leading: map[string]bool{}}
	cp.bg, cp.cancel = context.WithCancel(context.Background())
	started := cp // the named result is nil on an error return
	defer func() {
		if err != nil {
			started.Stop()
		}
	}()
	transformer, err := cfg.secretsTransformer()
	if err != nil {
		return nil, err
	}
	natsID, err := cp.connect()
	if err != nil {
		return nil, err
	}
	memory := cfg.DataDir == "" && cfg.NATSURL == ""
	// Only the apiserver may create (and write) the stream on secured NATS.
	logCfg := statelog.Config{Replicas: cfg.Replicas, Memory: memory, BookmarkInterval: cfg.Bookmarks,
		ReadOnly: natsID.Role != identity.APIServer, Transformer: transformer, ConsumerNames: natsID.ConsumerNames()}
	if cp.NATS != nil && !memory && !cfg.NoFsync && !logCfg.ReadOnly {
		logCfg.Sync = cp.NATS.StreamSync(statelog.DefaultStream)
	}
	if logCfg.Space, err = cp.guardDisk(); err != nil {
		return nil, fmt.Errorf("disk guard: %w", err)
	}
	if cp.Log, err = openLog(ctx, cp.Conn, logCfg); err != nil {
		return nil, fmt.Errorf("state log: %w", err)
	}
	if cfg.LeaderElect {
		if cp.elector, err = lease.New(ctx, cp.Conn, lease.Config{Replicas: cfg.Replicas, Memory: memory}); err != nil {
			return nil, err
		}
	}
	policy := actorkit.DefaultPolicy
	if cfg.Supervision != (actorkit.Policy{}) {
		policy = cfg.Supervision
	}
	cp.Actors = actorkit.NewSystem(actorkit.WithLogger(cfg.Logger), actorkit.WithPolicy(policy))
	cp.Actors.Health().OnStoppedForGood(cp.reportStoppedForGood)
	cp.Informers = informer.NewFactory(cp.Log)
	if cfg.CheckCacheMutations {
		cp.Informers.CheckMutations()
	}
	if err := cp.spawn(Informers, cp.Informers.Actor()); err != nil {
		return nil, err
	}
	if cfg.Runs(APIServer) {
		if err := cp.newAPIServer(); err != nil {
			return nil, err
		}
	}
	cp.Client = &apiclient.Client{T: cp.apiTransport(cp.Conn, natsID)}
	if transformer == nil {
		// Secrets are sealed in the log with a key only apiservers hold: read them through one.
		cp.Informers.ReadThrough("", "secrets", func(k *schemas.Kind, ns string) informer.Source {
			return &informer.APISource{Client: cp.Client, Kind: k, Namespace: ns}
		})
	}
	if cfg.Runs(APIServer) {
		if err := cp.startAPIServer(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.Runs(Scheduler) {
		// A new producer per term: a new leader starts from the log, not from a past term's cache.
		if err := cp.run(elected{leaseName: SchedulerLease, spawn: func() ([]*actorkit.PID, error) {
			client, err := cp.clientFor(identity.Scheduler)
			if err != nil {
				return nil, err
			}
			pid, err := cp.Actors.Spawn(Scheduler, scheduler.NewActor(scheduler.Config{Informers: cp.Informers, Client: client}))
			if err != nil {
				return nil, err
			}
			return []*actorkit.PID{pid}, nil
		}}); err != nil {
			return nil, err
		}
	}
	if ctrls := cfg.controllerNames(); len(ctrls) > 0 {
		if err := cp.run(elected{leaseName: ControllerManagerLease, spawn: func() ([]*actorkit.PID, error) {
			client, err := cp.clientFor(identity.ControllerManager)
			if err != nil {
				return nil, err
			}
			opts, err := cp.controllerOptions()
			if err != nil {
				return nil, err
			}
			return controllers.Start(cp.Actors, controllers.Deps{Log: cp.Log, Informers: cp.Informers, Client: client, Logger: cfg.Logger}, ctrls, opts)
		}}); err != nil {
			return nil, err
		}
	}
	if !cfg.Runs(APIServer) {
		return cp, nil // nothing here answers the API; the components retry until a replica does
	}
	if err := cp.waitReady(ctx); err != nil {
		return cp, err
	}
	if err := cp.startAPIEndpoints(ctx); err != nil {
		return cp, fmt.Errorf("kubernetes service: %w", err)
	}
	return cp, nil
}

// dialNATS connects, waiting up to 30s for a server to come up: replicas may start before
// their NATS servers (a compose stack). (nats.RetryOnFailedConnect instead left a connection
// whose requests went unanswered after a later failover.)
func dialNATS(url string, opts []nats.Option) (*nats.Conn, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := nats.Connect(url, opts...)
		if !errors.Is(err, nats.ErrNoServers) || time.Now().After(deadline) {
			return nc, err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// openLog opens the state log, waiting out a NATS cluster that is still electing its
// JetStream leaders (a compose stack starts everything at once).
func openLog(ctx context.Context, nc *nats.Conn, cfg statelog.Config) (*statelog.Log, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := jetStreamAnswers(ctx, nc, cfg.Stream)
		var l *statelog.Log
		if err == nil {
			l, err = statelog.Open(ctx, nc, cfg)
		}
		// A reader waits for the apiserver to create the stream; a writer for another replica's
		// create of it, which takes the name before the stream serves (replicas start together).
		waiting := transient(err) || errors.Is(err, jetstream.ErrStreamNotFound)
		if err == nil || !waiting || ctx.Err() != nil {
			return l, notConnected(nc, err)
		}
		select {
		case <-ctx.Done():
			return nil, notConnected(nc, errors.Join(err, ctx.Err()))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// jetStreamAnswers probes with a short deadline: a request sent before the servers are up, or
// before they agree on a meta leader, can go unanswered, and Open would wait out its whole
// deadline on it.
func jetStreamAnswers(ctx context.Context, nc *nats.Conn, stream string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if stream == "" {
		stream = "STATE" // statelog's default
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err = js.Stream(ctx, stream); errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil // JetStream answered: Open creates it
	}
	return err
}

// notConnected names the servers when the real cause is that none of them answers.
func notConnected(nc *nats.Conn, err error) error {
	if err == nil || nc.IsConnected() {
		return err
	}
	return fmt.Errorf("no NATS server reachable at %v: %w", nc.Servers(), err)
}

// clusterNoPeers is JetStream's "no suitable peers for placement": a replicated stream asked
// for before the cluster has seen enough of its servers online (they start at once).
const clusterNoPeers jetstream.ErrorCode = 10005

func transient(err error) bool {
	var ae *jetstream.APIError
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.As(err, &ae) && (ae.Code == 503 || ae.ErrorCode == clusterNoPeers)
}

func (cp *ControlPlane) spawn(name string, producer func() actorkit.Actor) error {
	pid, err := cp.Actors.Spawn(name, producer)
	if err != nil {
		return err
	}
	cp.track([]*actorkit.PID{pid})
	return nil
}

// Actor returns the PID of a running component by name ("apiserver", "scheduler", a
// controller: the controller manager's child of that name), nil when it does not run here.
func (cp *ControlPlane) Actor(name string) *actorkit.PID {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, pid := range cp.pids {
		if pid.Id == name {
			return pid
		}
		if pid.Id == controllers.Manager && slices.Contains(cp.cfg.controllerNames(), name) {
			return actorkit.NewPID(pid.Address, controllers.Manager+"/"+name)
		}
	}
	return nil
}

// URL is the apiserver's HTTP base URL ("" without HTTP).
func (cp *ControlPlane) URL() string {
	if cp.listener == nil {
		return ""
	}
	if cp.apiAuth != nil {
		return "https://" + cp.listener.Addr().String()
	}
	return "http://" + cp.listener.Addr().String()
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

// Stop shuts everything down in reverse order. Leaders step down and release their leases
// first, so a standby takes over at once. Stopping twice is a no-op.
func (cp *ControlPlane) Stop() {
	if cp.stopped.Swap(true) {
		return
	}
	if cp.cancel != nil {
		cp.cancel()
	}
	cp.wg.Wait()
	if cp.Actors != nil {
		cp.mu.Lock()
		pids := cp.pids
		cp.mu.Unlock()
		cp.untrack(pids)
		cp.Actors.Shutdown()
	}
	if cp.listener != nil {
		_ = cp.listener.Close()
	}
	if cp.Log != nil {
		_ = cp.Log.Close()
	}
	cp.natsSec.close()
	if cp.Conn != nil {
		cp.Conn.Close()
	}
	if cp.NATS != nil {
		cp.NATS.Shutdown()
	}
	cp.dataLock.release() // after the store is closed
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
