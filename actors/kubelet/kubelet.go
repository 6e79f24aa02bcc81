// Package kubelet is Skiff's node agent: it registers its Node, renews the node's Lease, and
// makes the pods bound to it real on the node's container runtime (containerd + runc + CNI,
// package runtime), reporting their status back through the apiserver. Like every Skiff
// actor it only reads the state log (informers) and asks the apiserver for changes.
//
// The kubelet actor has a child actor per pod bound to the node (podactor.go), and each pod
// actor a child per probe of its running containers (probeactor.go). A pod is synced
// level-triggered by key: the desired spec from the informer is compared with what containerd
// has (runtime.List), and the gap is closed. Everything the agent needs to resume lives in
// containerd or in the kubelet's closure, so a restarted actor (or a brand-new agent) adopts
// the running containers instead of starting them again.
package kubelet

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/events"
	"github.com/skiff-sh/skiff/actors/informer"
	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/actors/kubelet/volumes"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/internal/tracing"
	"github.com/skiff-sh/skiff/schemas"
)

// Version is reported as the node's kubelet version.
const Version = "v1.37.2-skiff"

// LeaseNamespace holds one heartbeat Lease per node.
const LeaseNamespace = corev1.NamespaceNodeLease

// Config configures one node's agent. Zero durations get the defaults listed.
type Config struct {
	Log       *statelog.Log
	Informers *informer.Factory // the process's shared informers (required)
	Client    *apiclient.Client
	// PodsViaAPI: the kubelet keeps its own cache of this node's pods only, listed and watched
	// through the apiserver (Client over NATS) with fieldSelector spec.nodeName=<node>, which
	// the apiserver answers from its pods-by-node index; for a node agent in its own process.
	// false: the shared pod cache of Informers (skiff up, where the scheduler holds it anyway).
	PodsViaAPI bool
	// Pods is that cache when the agent shares it (with the proxy, for hostPorts); nil = made
	// here (PodInformer). The kubelet runs it when PodsViaAPI.
	Pods     *informer.Informer
	NodeName string            // required
	Runtime  *kruntime.Runtime // required; the agent never closes it
	NodeIP   string            // InternalIP and pods' hostIP; default: the first non-loopback IPv4
	PodCIDR  string            // written into spec.podCIDR
	Labels   map[string]string // extra node labels
	DNS      DNSConfig         // pods' resolv.conf (dns.go)
	// LocalPathDir holds the node's local-path volumes (the default StorageClass); it is
	// published on the Node (skiff.io/local-path-dir). Default: local-path in the runtime's
	// data directory.
	LocalPathDir string

	LeaseDuration      time.Duration // default 40 s
	RenewInterval      time.Duration // lease renewal, default 10 s
	NodeStatusInterval time.Duration // heartbeat in the Ready condition, default 1 min
	ResyncInterval     time.Duration // every pod re-checked and orphans removed, default 10 s

	// Crash-loop back-off: the first restart is immediate, then BackoffBase doubling up to
	// BackoffMax; a container that ran BackoffReset long starts over. Defaults 10 s, 300 s, 10 min.
	BackoffBase  time.Duration
	BackoffMax   time.Duration
	BackoffReset time.Duration

	Workers int // pods synced at once, default 4
	Logger  *slog.Logger
}

func (c *Config) defaults() {
	if c.DNS.ResolvConf == "" {
		c.DNS.ResolvConf = "/etc/resolv.conf"
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.LeaseDuration, 40*time.Second)
	def(&c.RenewInterval, 10*time.Second)
	def(&c.NodeStatusInterval, time.Minute)
	def(&c.ResyncInterval, 10*time.Second)
	def(&c.BackoffBase, 10*time.Second)
	def(&c.BackoffMax, 300*time.Second)
	def(&c.BackoffReset, 10*time.Minute)
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.NodeIP == "" {
		c.NodeIP = FirstIPv4()
	}
	if c.LocalPathDir == "" && c.Runtime != nil {
		c.LocalPathDir = filepath.Join(c.Runtime.Root(), "local-path")
	}
}

// kubelet is the agent's state that outlives every actor restart: it lives in the producer's
// closure, shared by the kubelet actor, its pod actors and their probe actors.
type kubelet struct {
	cfg      Config
	rt       *kruntime.Runtime
	client   *apiclient.Client
	pods     *informer.Informer
	nodes    *informer.Informer
	services *informer.Informer // for the Service environment variables
	volumes  *volumes.Manager
	recorder *events.Recorder
	backoff  *backoff
	probes   *probeManager
	// retries spaces the syncs of a pod whose last sync failed (5 ms doubling to 1000 s, as the
	// controllers' work queue does); slots bounds the syncs running at once (Workers).
	retries workqueue.TypedRateLimiter[string]
	slots   chan struct{}

	sys  *actorkit.System
	self atomic.Pointer[actorkit.PID] // the kubelet actor, for messages from goroutines

	links tracing.Links // causes of each pod's next sync, linked from its span

	mu      sync.Mutex
	keys    map[types.UID]string // pod UID -> key, for runtime events
	started map[types.UID]bool   // pods whose startup was observed (podStartup)
}

// New returns the producer of a node agent actor. Spawn it once per node; state that must
// survive an actor restart lives in containerd or in this closure.
func New(cfg Config) func() actorkit.Actor {
	cfg.defaults()
	k := &kubelet{
		cfg: cfg, rt: cfg.Runtime, client: cfg.Client,
		pods:     cfg.Pods,
		nodes:    cfg.Informers.For("", "nodes"),
		services: cfg.Informers.For("", "services"),
		recorder: events.New(cfg.Client, "kubelet", cfg.NodeName),
		backoff:  newBackoff(cfg.BackoffBase, cfg.BackoffMax, cfg.BackoffReset),
		retries:  workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second),
		slots:    make(chan struct{}, cfg.Workers),
		keys:     map[types.UID]string{},
		started:  map[types.UID]bool{},
	}
	if k.pods == nil {
		k.pods = PodInformer(cfg)
	}
	k.probes = newProbeManager(k)
	k.volumes = &volumes.Manager{PodDir: cfg.Runtime.PodDir, Objects: apiObjects{k}, Claims: apiObjects{k}, Token: newTokenCache(cfg.Client).get, LocalPathDir: cfg.LocalPathDir}
	k.pods.AddIndexer(informer.IndexNodeName, informer.PodNodeName)
	return func() actorkit.Actor { return &kubeletActor{k: k} }
}

// PodInformer is the cache of pods the kubelet reads: see Config.PodsViaAPI. Its pods are
// indexed by informer.IndexNodeName.
func PodInformer(cfg Config) *informer.Informer {
	inf := cfg.Informers.For("", "pods")
	if cfg.PodsViaAPI {
		kind, _ := schemas.ByResource("", "v1", "pods")
		inf = informer.NewFrom(&informer.APISource{Client: cfg.Client, Kind: kind, FieldSelector: "spec.nodeName=" + cfg.NodeName}, kind, "")
	}
	inf.AddIndexer(informer.IndexNodeName, informer.PodNodeName)
	return inf
}

// observe notes a change of one of this node's pods (its UID for runtime events, its write's
// trace for the next sync) and reports whether it is this node's.
func (k *kubelet) observe(p *corev1.Pod) bool {
	if p.Spec.NodeName != k.cfg.NodeName {
		return false
	}
	k.mu.Lock()
	k.keys[p.UID] = controllerkit.KeyOf(p)
	k.mu.Unlock()
	k.noteWrite(p)
	return true
}

// boundHere reports whether the cache holds a pod under key bound to this node.
func (k *kubelet) boundHere(key string) bool {
	o, ok := k.pods.Get(controllerkit.SplitKey(key))
	return ok && o.(*corev1.Pod).Spec.NodeName == k.cfg.NodeName
}

// enqueue asks for a sync of key (from any goroutine): the kubelet actor hands it to the pod's
// actor. resync marks a periodic re-check, which does not extend the pod's trace.
func (k *kubelet) enqueue(key string, resync bool) {
	if self := k.self.Load(); self != nil {
		k.sys.Send(self, &syncRequest{key: key, resync: resync})
	}
}

// enqueueAfter asks for a sync of key after d (a retry, a crash-loop back-off ending).
func (k *kubelet) enqueueAfter(key string, d time.Duration) {
	time.AfterFunc(d, func() { k.enqueue(key, false) })
}

func (k *kubelet) keyFor(uid types.UID) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys[uid]
}

func (k *kubelet) forgetUID(uid types.UID) {
	k.mu.Lock()
	delete(k.keys, uid)
	delete(k.started, uid)
	k.mu.Unlock()
	k.backoff.forget(uid)
	k.probes.retain(uid, nil)
}

func (k *kubelet) ownPods() []*corev1.Pod {
	return controllerkit.Pods(k.pods.ByIndex(informer.IndexNodeName, k.cfg.NodeName))
}

func (k *kubelet) resyncAll() {
	for _, p := range k.ownPods() {
		k.enqueue(controllerkit.KeyOf(p), true)
	}
}

// watchRuntime turns container exits and OOMs into pod syncs, and an OOM into an event.
func (k *kubelet) watchRuntime(ctx context.Context) {
	for ev := range k.rt.Events(ctx) {
		key := k.keyFor(types.UID(ev.PodUID))
		if key == "" {
			continue
		}
		if ev.Type == kruntime.EventOOM {
			if o, ok := k.pods.Get(controllerkit.SplitKey(key)); ok {
				k.recorder.Eventf(ctx, o, corev1.EventTypeWarning, "OOMKilling", "Container %s (attempt %d) was killed: out of memory", ev.Name, ev.Attempt)
			}
		}
		k.enqueue(key, false)
	}
}

// housekeeping adopts or removes what the runtime holds: a sandbox whose pod still exists
// here is synced (its running containers are kept), any other sandbox is torn down. It runs
// at every (re)start, once the caches are in, and then every ResyncInterval.
func (k *kubelet) housekeeping(ctx context.Context) {
	t := time.NewTicker(k.cfg.ResyncInterval)
	defer t.Stop()
	for {
		k.removeOrphans(ctx)
		k.resyncAll()
		k.cleanLocalPath(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (k *kubelet) removeOrphans(ctx context.Context) {
	// The runtime is read before the cache: a sandbox made after this List belongs to a pod
	// the cache already had, so it is never mistaken for an orphan.
	sandboxes, err := k.rt.List(ctx)
	if err != nil {
		k.cfg.Logger.Warn("kubelet: list runtime", "node", k.cfg.NodeName, "err", err)
		return
	}
	live := map[types.UID]bool{}
	for _, p := range k.ownPods() {
		live[p.UID] = true
	}
	for _, sb := range sandboxes {
		uid := types.UID(sb.PodUID)
		if live[uid] {
			continue
		}
		k.cfg.Logger.Info("kubelet: removing orphaned sandbox", "node", k.cfg.NodeName, "pod", sb.PodNamespace+"/"+sb.PodName, "uid", uid)
		if err := k.rt.StopSandbox(ctx, sb.PodUID); err != nil {
			k.cfg.Logger.Warn("kubelet: remove orphan", "uid", uid, "err", err)
			continue
		}
		k.forgetUID(uid)
	}
}

// FirstIPv4 is the default node address: the first non-loopback IPv4 of the host.
func FirstIPv4() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return "127.0.0.1"
}
