// Package proxy is the node's Service proxy: an actor that mirrors Services
// and EndpointSlices from the state log and programs the eBPF socket load
// balancer (bpf/lb) to match. Its maps and hooks are pinned in bpffs, so a
// restarted proxy adopts them and traffic never stops.
package proxy

import (
	"log/slog"
	"maps"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"

	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bpf/lb"
	"github.com/skiff-sh/skiff/bpf/nodeport"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/internal/tracing"
)

// BPFRoot is where bpffs is mounted on a node.
const BPFRoot = "/sys/fs/bpf"

// DefaultPinDir is where a node's proxy pins its maps and links.
func DefaultPinDir(node string) string { return filepath.Join(BPFRoot, "skiff", node) }

// Config configures one node's proxy.
type Config struct {
	Log       *statelog.Log
	Informers *informer.Factory // the process's shared informers; nil = its own (tests)
	NodeName  string
	// Cgroups are the cgroup2 directories whose processes reach Services:
	// the node's pod subtree and, if wanted, the host's own cgroup.
	Cgroups []string
	// PinDir is a bpffs directory for maps and links (DefaultPinDir if empty;
	// bpffs is mounted at BPFRoot when it is not yet).
	PinDir string
	// Cleanup removes the pinned programs and maps when the actor stops for
	// good; otherwise they keep routing until the next proxy adopts them.
	Cleanup bool
	// Netns lists the network namespaces (paths) of local pods: after a UDP
	// Service loses backends, connected UDP sockets pinned to them are
	// aborted there too (the proxy's own namespace is always covered).
	Netns func() []string
	// LocalDNS is this node's cluster DNS server: when set, the KubeDNS Service is routed
	// there (Local) instead of to its endpoints.
	LocalDNS netip.AddrPort
	// NodeIPs are this node's addresses: NodePort and LoadBalancer Services are served there
	// (none: not served). Interfaces get the tc programs for traffic from outside (default:
	// the interfaces holding NodeIPs).
	NodeIPs    []netip.Addr
	Interfaces []string
	// Pods is the cache of this node's pods (the kubelet's, indexed by informer.IndexNodeName):
	// their hostPorts are served at NodeIPs. nil: hostPorts are not served.
	Pods *informer.Informer
	// Maps sizes the maps (PinPath is ignored: PinDir is used).
	Maps   lb.Options
	Logger *slog.Logger
}

// Stats counts the proxy's work since New, over all incarnations.
type Stats struct {
	lb.Stats     // map entries written and deleted
	Upserts  int // Service ports whose entries were (re)written
	Deletes  int // Service ports removed
	Syncs    int // full resyncs against Dump (one per incarnation)
}

// Proxy holds what outlives actor restarts: informers, indexes, counters.
type Proxy struct {
	cfg      Config
	svcs     *informer.Informer
	slices   *informer.Informer
	pods     *informer.Informer // nil: no hostPorts
	handlers map[*informer.Informer]informer.Handler

	mu       sync.Mutex
	owned    map[string][]lb.ServiceKey                   // service key -> programmed ports
	owner    map[lb.ServiceKey]string                     // programmed port -> service key
	queue    workqueue.TypedRateLimitingInterface[string] // current incarnation's
	dp       *lb.Dataplane                                // current incarnation's, nil between
	np       *nodeport.Dataplane                          // likewise (nil: no node ports served)
	hc       *healthChecks                                // likewise
	extOwned map[string][]nodeport.Key                    // service key -> programmed tc entries
	synced   bool
	stats    Stats
	links    tracing.Links // the writes that woke each Service, for its sync's span
}

// New prepares a proxy; spawn Producer() on an actorkit.System to run it.
func New(cfg Config) *Proxy {
	if cfg.PinDir == "" {
		cfg.PinDir = DefaultPinDir(cfg.NodeName)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Proxy{
		cfg:      cfg,
		svcs:     cfg.Informers.For("", "services"),
		slices:   cfg.Informers.For("discovery.k8s.io", "endpointslices"),
		pods:     cfg.Pods,
		owned:    map[string][]lb.ServiceKey{},
		owner:    map[lb.ServiceKey]string{},
		extOwned: map[string][]nodeport.Key{},
	}
	// The Service -> slices index lives in the informer, updated with its cache: complete as
	// soon as the cache has synced. (An index the proxy built from the events in its mailbox
	// lagged behind it after a restart, and the first resync shrank the maps.)
	p.slices.AddIndexer(IndexService, func(o runtime.Object) []string {
		if k := serviceOf(o.(*discoveryv1.EndpointSlice)); k != "" {
			return []string{k}
		}
		return nil
	})
	svcChanged := func(o runtime.Object) {
		key := keyOf(o.(*corev1.Service).Namespace, o.(*corev1.Service).Name)
		p.noteService(key)
		p.enqueue(key)
	}
	// Subscribed by each actor incarnation (actor.go): changes arrive in its mailbox.
	p.handlers = map[*informer.Informer]informer.Handler{
		p.svcs: informer.Funcs{
			Add:    svcChanged,
			Update: func(_, o runtime.Object) { svcChanged(o) },
			Delete: svcChanged,
		},
		p.slices: informer.Funcs{
			Add: func(o runtime.Object) { p.sliceChanged(nil, o.(*discoveryv1.EndpointSlice)) },
			Update: func(old, o runtime.Object) {
				p.sliceChanged(old.(*discoveryv1.EndpointSlice), o.(*discoveryv1.EndpointSlice))
			},
			Delete: func(o runtime.Object) { p.sliceChanged(o.(*discoveryv1.EndpointSlice), nil) },
		},
	}
	if p.pods != nil {
		p.handlers[p.pods] = p.podHandler()
	}
	return p
}

func keyOf(namespace, name string) string { return namespace + "/" + name }

func splitKey(key string) (namespace, name string) {
	namespace, name, _ = strings.Cut(key, "/")
	return namespace, name
}

// serviceOf is the key of the Service a slice belongs to ("" if unlabelled).
func serviceOf(es *discoveryv1.EndpointSlice) string {
	name := es.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return ""
	}
	return keyOf(es.Namespace, name)
}

// sliceChanged enqueues the Services involved (both, if a slice was relabelled).
func (p *Proxy) sliceChanged(old, cur *discoveryv1.EndpointSlice) {
	var was string
	if old != nil {
		if was = serviceOf(old); was != "" {
			p.enqueue(was)
		}
	}
	if cur != nil {
		if k := serviceOf(cur); k != "" {
			p.noteSlice(k, cur.Namespace, cur.Name)
			if k != was {
				p.enqueue(k)
			}
		}
	}
}

// enqueue is a no-op while no incarnation runs: the next one resyncs all.
func (p *Proxy) enqueue(key string) {
	p.mu.Lock()
	q := p.queue
	p.mu.Unlock()
	if q != nil {
		q.Add(key)
	}
}

// IndexService files EndpointSlices under the namespace/name of their Service.
const IndexService = "endpointslice-service"

// desired computes one Service's entries from the caches: the socket LB's and the tc
// programs' (outside traffic to node ports and LoadBalancer addresses).
func (p *Proxy) desired(svc *corev1.Service) (map[lb.ServiceKey]lb.ServiceSpec, map[nodeport.Key][]nodeport.Backend) {
	if p.cfg.LocalDNS.IsValid() && keyOf(svc.Namespace, svc.Name) == KubeDNS {
		return Local(svc, p.cfg.LocalDNS), nil
	}
	objs := p.slices.ByIndex(IndexService, keyOf(svc.Namespace, svc.Name))
	eps := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		eps = append(eps, o.(*discoveryv1.EndpointSlice))
	}
	want := Desired(svc, eps, p.cfg.NodeName)
	sock, tc := External(svc, eps, p.cfg.NodeName, p.cfg.NodeIPs)
	maps.Copy(want, sock)
	return want, tc
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Synced reports whether the current incarnation has finished its resync
// and is following changes.
func (p *Proxy) Synced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.synced
}

// Dump reads the programmed Services back from the kernel maps.
func (p *Proxy) Dump() ([]lb.ServiceDump, error) {
	p.mu.Lock()
	dp := p.dp
	p.mu.Unlock()
	if dp != nil {
		if ds, err := dp.Dump(); err == nil {
			return ds, nil
		}
	}
	// Between incarnations (or closed under us) the pins hold the truth.
	return lb.DumpPinned(p.cfg.PinDir)
}

// ServiceDump is one programmed Service port as the kernel maps hold it.
type ServiceDump = lb.ServiceDump

// ReadPinned reads what a node's proxy programmed from its pinned maps,
// with no proxy or control plane running (root on the node, like bpftool).
func ReadPinned(pinDir string) ([]ServiceDump, error) { return lb.DumpPinned(pinDir) }

// ReadPinnedExternal reads the tc entries for outside traffic a node's proxy pinned.
func ReadPinnedExternal(pinDir string) ([]nodeport.Entry, error) {
	return nodeport.DumpPinned(filepath.Join(pinDir, "nodeport"))
}
