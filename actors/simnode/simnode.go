// Package simnode simulates nodes for scale tests, like kwok: it registers N Nodes, renews their
// Leases, and plays the kubelet for pods bound to them (Running and Ready at once, graceful
// deletes finished with grace 0) without running any container. It is never the default runtime.
package simnode

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/actors/nodeheartbeat"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/logvalue"
)

// Label and annotation that mark a simulated node.
const (
	LabelSimulated = "skiff.sh/simulated"
	LeaseNamespace = nodeheartbeat.LeaseNamespace
)

// Config configures a fleet of simulated nodes.
type Config struct {
	Log    *statelog.Log
	Client *apiclient.Client
	// Informers is the process's shared informer factory; if nil the fleet makes its own and runs
	// it as a child actor.
	Informers *informer.Factory
	Nodes     int    // how many; default 3
	Prefix    string // node names are <Prefix><i>, i from 0; default "sim-"
	// Capacity of each node; defaults cpu 8, memory 32Gi, pods 110.
	Capacity corev1.ResourceList
	Labels   map[string]string // extra node labels
	// LeaseDuration is written into each Lease (default 40 s); RenewInterval is how often each
	// lease is renewed (default a quarter of LeaseDuration); NodeStatusInterval is how often an
	// unchanged Ready status is posted again (default 5 min, as the kubelet does).
	LeaseDuration      time.Duration
	RenewInterval      time.Duration
	NodeStatusInterval time.Duration
	// HeartbeatWorkers bounds the registrations and renewals in flight (default 64); Workers
	// the pods reconciled at once (default 64: every real node has a kubelet of its own, so a
	// fleet that writes pod statuses a few at a time would be the bottleneck it simulates away).
	HeartbeatWorkers int
	Workers          int
	Logger           *slog.Logger
}

func (c *Config) defaults() {
	if c.Nodes <= 0 {
		c.Nodes = 3
	}
	if c.Prefix == "" {
		c.Prefix = "sim-"
	}
	if c.Capacity == nil {
		c.Capacity = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("8"),
			corev1.ResourceMemory: resource.MustParse("32Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}
	}
	if c.LeaseDuration <= 0 {
		c.LeaseDuration = 40 * time.Second
	}
	if c.RenewInterval <= 0 {
		c.RenewInterval = c.LeaseDuration / 4
	}
	if c.NodeStatusInterval <= 0 {
		c.NodeStatusInterval = 5 * time.Minute
	}
	if c.HeartbeatWorkers <= 0 {
		c.HeartbeatWorkers = 64
	}
	if c.Workers <= 0 {
		c.Workers = 64
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Freeze makes a node's simulated kubelet stop: no more lease renewals, no more pod updates.
type Freeze struct{ Node string }

// Thaw brings a frozen node back.
type Thaw struct{ Node string }

// NodeName is the name of the i-th node of a fleet with prefix.
func NodeName(prefix string, i int) string { return fmt.Sprintf("%s%d", prefix, i) }

// Kinds are the only kinds the fleet reads from the log (its pod and node caches): a process
// that runs nothing else joins reading only these, so the log's other writes, its own 500
// Lease renewals a second at 5,000 nodes first, never reach it.
func Kinds() []*schemas.Kind {
	return []*schemas.Kind{informer.MustKind("", "pods"), informer.MustKind("", "nodes")}
}

// fleet is what outlives the actor's restarts: the caches, the heartbeat's memory of leases,
// frozen nodes and handed-out pod IPs.
type fleet struct {
	cfg        Config
	client     *apiclient.Client
	informers  *informer.Factory
	ownFactory bool
	pods       informer.Typed[*corev1.Pod]
	nodes      informer.Typed[*corev1.Node]
	hb         *nodeheartbeat.Heartbeat
	names      []string
	index      map[string]int // node name -> index (for IPs)

	mu     sync.Mutex
	frozen map[string]bool
	nextIP map[string]int
}

// New returns the producer of the simulated-node actor.
func New(cfg Config) func() actorkit.Actor {
	cfg.defaults()
	f := &fleet{cfg: cfg, client: cfg.Client, informers: cfg.Informers, index: map[string]int{},
		frozen: map[string]bool{}, nextIP: map[string]int{}}
	if f.informers == nil {
		f.informers, f.ownFactory = informer.NewFactory(cfg.Log), true
		ReadBoundPods(f.informers)
	}
	f.pods = informer.Shared[*corev1.Pod](f.informers, "", "pods")
	f.pods.AddIndexer(informer.IndexNodeName, func(p *corev1.Pod) []string {
		if p.Spec.NodeName == "" {
			return nil
		}
		return []string{p.Spec.NodeName}
	})
	f.nodes = informer.Shared[*corev1.Node](f.informers, "", "nodes")
	f.hb = &nodeheartbeat.Heartbeat{Client: cfg.Client, Nodes: f.nodes, LeaseDuration: cfg.LeaseDuration,
		StatusInterval: cfg.NodeStatusInterval, ReadyMessage: "simulated kubelet is posting ready status"}
	for i := 0; i < cfg.Nodes; i++ {
		name := NodeName(cfg.Prefix, i)
		f.names = append(f.names, name)
		f.index[name] = i
	}
	return func() actorkit.Actor { return &fleetActor{f: f} }
}

func (f *fleet) setFrozen(node string, v bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen[node] = v
}

func (f *fleet) isFrozen(node string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen[node]
}

func (f *fleet) ours(node string) bool {
	_, ok := f.index[node]
	return ok
}

// ReadBoundPods makes f's pod informers keep bound pods only, for a process whose every pod
// reader is a fleet (skiff sim nodes): its kubelets read bound pods only (a kubelet's
// spec.nodeName field selector), so a third of the pod writes, the creates, are then neither
// decoded nor kept. Call it before f's first pod informer is made.
func ReadBoundPods(f *informer.Factory) { f.Admit("", "pods", boundPod) }

// boundPod admits a stored pod bound to a node (or one whose node cannot be read: the decode
// then reports it).
func boundPod(value []byte) bool {
	node, err := logvalue.PodNodeName(value)
	return err != nil || node != ""
}
