// Package simnode simulates nodes for scale tests, like kwok: it registers N Nodes, renews their
// Leases, and plays the kubelet for pods bound to them (Running and Ready at once, graceful
// deletes finished with grace 0) without running any container. It is never the default runtime.
package simnode

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bus/statelog"
)

// Label and annotation that mark a simulated node.
const (
	LabelSimulated = "skiff.sh/simulated"
	LeaseNamespace = "kube-node-lease"
)

// Config configures a fleet of simulated nodes.
type Config struct {
	Log    *statelog.Log
	Client *apiclient.Client
	Nodes  int    // how many; default 3
	Prefix string // node names are <Prefix><i>, i from 0; default "sim-"
	// Capacity of each node; defaults cpu 8, memory 32Gi, pods 110.
	Capacity corev1.ResourceList
	Labels   map[string]string // extra node labels
	// LeaseDuration is written into each Lease (default 40 s); RenewInterval is how often the
	// leases are renewed (default a quarter of LeaseDuration).
	LeaseDuration time.Duration
	RenewInterval time.Duration
	Workers       int
	Logger        *slog.Logger
}

// Freeze makes a node's simulated kubelet stop: no more lease renewals, no more pod updates.
type Freeze struct{ Node string }

// Thaw brings a frozen node back.
type Thaw struct{ Node string }

// NodeName is the name of the i-th node of a fleet with prefix.
func NodeName(prefix string, i int) string { return fmt.Sprintf("%s%d", prefix, i) }

type fleet struct {
	cfg    Config
	client *apiclient.Client
	pods   *informer.Informer
	nodes  *informer.Informer
	queue  *controllerkit.Queue
	index  map[string]int // node name -> index (for pod IPs)

	mu     sync.Mutex
	frozen map[string]bool
	nextIP map[string]int
}

// New returns the producer of the simulated-node actor.
func New(cfg Config) func() actorkit.Actor {
	if cfg.Nodes <= 0 {
		cfg.Nodes = 3
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "sim-"
	}
	if cfg.Capacity == nil {
		cfg.Capacity = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("8"),
			corev1.ResourceMemory: resource.MustParse("32Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 40 * time.Second
	}
	if cfg.RenewInterval <= 0 {
		cfg.RenewInterval = cfg.LeaseDuration / 4
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	f := &fleet{
		cfg: cfg, client: cfg.Client,
		pods:   informer.For(cfg.Log, "", "pods"),
		nodes:  informer.For(cfg.Log, "", "nodes"),
		queue:  &controllerkit.Queue{},
		index:  map[string]int{},
		frozen: map[string]bool{},
		nextIP: map[string]int{},
	}
	for i := 0; i < cfg.Nodes; i++ {
		f.index[NodeName(cfg.Prefix, i)] = i
	}
	f.pods.AddHandler(informer.Funcs{
		Add:    func(o runtime.Object) { f.enqueuePod(o.(*corev1.Pod)) },
		Update: func(_, o runtime.Object) { f.enqueuePod(o.(*corev1.Pod)) },
	})
	ctl := &controllerkit.Controller{
		Name:      "simnode",
		Workers:   cfg.Workers,
		Informers: []*informer.Informer{f.pods, f.nodes},
		Queue:     f.queue,
		Reconcile: f.syncPod,
		Resync: func() {
			for _, o := range f.pods.List(nil) {
				f.enqueuePod(o.(*corev1.Pod))
			}
		},
		Loops:   []func(context.Context){f.heartbeat},
		Receive: f.receive,
		Logger:  cfg.Logger,
	}
	return ctl.Producer()
}

func (f *fleet) receive(ctx actorkit.Context) {
	switch m := ctx.Message().(type) {
	case *Freeze:
		f.setFrozen(m.Node, true)
	case *Thaw:
		f.setFrozen(m.Node, false)
		for _, o := range f.pods.List(func(o runtime.Object) bool { return o.(*corev1.Pod).Spec.NodeName == m.Node }) {
			f.enqueuePod(o.(*corev1.Pod))
		}
	}
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

func (f *fleet) enqueuePod(p *corev1.Pod) {
	if f.ours(p.Spec.NodeName) {
		f.queue.Add(controllerkit.KeyOf(p))
	}
}
