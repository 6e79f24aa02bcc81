// Package netpol enforces NetworkPolicies on a node: an actor that follows NetworkPolicies,
// Pods and Namespaces through the shared informers, computes for each local pod its isolation
// and allowed peers, and programs the eBPF maps of bpf/policy, whose programs go on every pod
// veth on the node's bridge: by Protect for a new pod, at start for the veths already there.
package netpol

import (
	"log/slog"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bpf/policy"
)

// DefaultPinDir is where a node's policy maps and links are pinned.
func DefaultPinDir(node string) string { return filepath.Join("/sys/fs/bpf", "skiff-netpol", node) }

// Config configures one node's policy enforcement.
type Config struct {
	Informers *informer.Factory
	NodeName  string
	Bridge    string // the pods' bridge, whose veth ports get the programs (default skiff0)
	// HostAddrs are the node's addresses (the bridge's, the node IP): what they send to a
	// pod is allowed whatever its policies say, as Kubernetes specifies (probes).
	HostAddrs []netip.Addr
	PinDir    string // default DefaultPinDir(NodeName)
	Cleanup   bool   // remove links and maps when the actor stops for good
	Logger    *slog.Logger
}

// Enforcer holds what outlives actor restarts: informers, what is programmed, counters.
type Enforcer struct {
	cfg      Config
	pods     informer.Typed[*corev1.Pod]
	nss      informer.Typed[*corev1.Namespace]
	pols     informer.Typed[*networkingv1.NetworkPolicy]
	handlers map[*informer.Informer]informer.Handler

	mu      sync.Mutex
	owned   map[string]programmed // pod key -> its entries in the maps
	queue   workqueue.TypedRateLimitingInterface[string]
	synced  bool
	stats   Stats
	lastErr map[string]string // pod key -> why its rules could not be computed
	dp      *policy.Dataplane // the running incarnation's, for Protect, once its first pass is done
	up      chan struct{}     // closed while dp is set (upLocked)
	loadErr error             // why the last load failed
}

// programmed is what one local pod has in the maps.
type programmed struct {
	ip    netip.Addr
	ep    policy.Endpoint
	rules map[policy.RuleKey][]policy.PortRange
}

// Stats counts the enforcer's work since New.
type Stats struct {
	Syncs       int // pod syncs
	RuleWrites  int // rule entries written
	RuleDeletes int // rule entries deleted
	Attached    int // veths the programs were attached to (a veth that had them is not counted)
	VethsGone   int // veth deletions seen (their stale pins dropped)
	// AttachFailures are pod veths Protect could not attach to (each failed a sandbox).
	AttachFailures int
	Mode           string        // how the programs attach: "tcx", or "tc" (legacy) before Linux 6.6
	LastSyncTook   time.Duration // the last pod sync's compute and map writes
}

// New prepares an enforcer; spawn Producer() on an actorkit.System to run it.
func New(cfg Config) *Enforcer {
	if cfg.Bridge == "" {
		cfg.Bridge = "skiff0"
	}
	if cfg.PinDir == "" {
		cfg.PinDir = DefaultPinDir(cfg.NodeName)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	e := &Enforcer{
		cfg:     cfg,
		pods:    informer.Shared[*corev1.Pod](cfg.Informers, "", "pods"),
		nss:     informer.Shared[*corev1.Namespace](cfg.Informers, "", "namespaces"),
		pols:    informer.Shared[*networkingv1.NetworkPolicy](cfg.Informers, "networking.k8s.io", "networkpolicies"),
		owned:   map[string]programmed{},
		lastErr: map[string]string{},
	}
	e.pods.Informer().AddIndexer(informer.IndexNodeName, informer.PodNodeName)
	e.pods.AddIndexer(IndexLabels, func(p *corev1.Pod) []string {
		out := make([]string, 0, len(p.Labels))
		for k, v := range p.Labels {
			out = append(out, labelKey(p.Namespace, k, v))
		}
		return out
	})
	e.handlers = map[*informer.Informer]informer.Handler{
		e.pods.Informer(): informer.TypedFuncs[*corev1.Pod]{
			Add:    func(p *corev1.Pod) { e.podChanged(nil, p) },
			Update: e.podChanged,
			Delete: func(p *corev1.Pod) { e.podChanged(p, nil) },
		}.Handler(),
		e.nss.Informer(): informer.TypedFuncs[*corev1.Namespace]{
			Add: func(*corev1.Namespace) { e.enqueueIsolated() },
			Update: func(old, n *corev1.Namespace) {
				if !maps.Equal(old.Labels, n.Labels) {
					e.enqueueIsolated()
				}
			},
			Delete: func(*corev1.Namespace) { e.enqueueIsolated() },
		}.Handler(),
		e.pols.Informer(): informer.TypedFuncs[*networkingv1.NetworkPolicy]{
			Add:    func(np *networkingv1.NetworkPolicy) { e.enqueueLocal(np.Namespace) },
			Update: func(_, np *networkingv1.NetworkPolicy) { e.enqueueLocal(np.Namespace) },
			Delete: func(np *networkingv1.NetworkPolicy) { e.enqueueLocal(np.Namespace) },
		}.Handler(),
	}
	return e
}

func keyOf(ns, name string) string { return ns + "/" + name }

// IndexLabels files pods under each of their labels ("<namespace>/<key>=<value>"), so a
// selector's peers cost the pods carrying one of its labels.
const IndexLabels = "netpol-labels"

func labelKey(ns, k, v string) string { return ns + "/" + k + "=" + v }

// podChanged syncs a local pod; a change that can alter who a peer is (address, labels,
// phase, coming or going) also syncs every isolated local pod, the only ones with peers.
func (e *Enforcer) podChanged(old, cur *corev1.Pod) {
	for _, p := range []*corev1.Pod{old, cur} {
		if p != nil && p.Spec.NodeName == e.cfg.NodeName {
			e.enqueue(keyOf(p.Namespace, p.Name))
		}
	}
	if old == nil || cur == nil || old.Status.PodIP != cur.Status.PodIP || !maps.Equal(old.Labels, cur.Labels) ||
		old.Status.Phase != cur.Status.Phase || (old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) {
		e.enqueueIsolated()
	}
}

// enqueueLocal syncs this node's pods in a namespace (a policy there changed).
func (e *Enforcer) enqueueLocal(ns string) {
	for _, p := range e.pods.ByIndex(informer.IndexNodeName, e.cfg.NodeName) {
		if p.Namespace == ns {
			e.enqueue(keyOf(p.Namespace, p.Name))
		}
	}
}

func (e *Enforcer) enqueueIsolated() {
	e.mu.Lock()
	keys := slices.Collect(maps.Keys(e.owned))
	e.mu.Unlock()
	for _, k := range keys {
		e.enqueue(k)
	}
}

// enqueue is a no-op while no incarnation runs: the next one resyncs all.
func (e *Enforcer) enqueue(key string) {
	e.mu.Lock()
	q := e.queue
	e.mu.Unlock()
	if q != nil {
		q.Add(key)
	}
}

// Stats returns the counters.
func (e *Enforcer) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// Synced reports whether the current incarnation has programmed every local pod once.
func (e *Enforcer) Synced() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.synced
}

// peers reads the informers for Compute.
type peers struct{ e *Enforcer }

func (p peers) Policies(ns string) []*networkingv1.NetworkPolicy { return p.e.pols.InNamespace(ns) }
func (p peers) PodsIn(ns string) []*corev1.Pod                   { return p.e.pods.InNamespace(ns) }
func (p peers) Namespaces() []*corev1.Namespace                  { return p.e.nss.List() }
func (p peers) PodsLabelled(ns, k, v string) []*corev1.Pod {
	return p.e.pods.ByIndex(IndexLabels, labelKey(ns, k, v))
}
