// Package nodelifecycle watches node heartbeats (Leases in kube-node-lease renewed by each
// kubelet): a node silent for longer than the grace period becomes NotReady (Ready=Unknown),
// gets the unreachable NoExecute taint and its pods are marked not ready; pods on nodes with
// NoExecute taints are evicted once their toleration runs out.
package nodelifecycle

import (
	"log/slog"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/events"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Name is the controller's name in Events and logs.
const Name = "node-controller"

// LeaseNamespace holds one Lease per node, named after it.
const LeaseNamespace = corev1.NamespaceNodeLease

// Config configures the controller; zero durations take Kubernetes' defaults.
type Config struct {
	Informers *informer.Factory // the process's shared informers
	Client    *apiclient.Client
	// GracePeriod without a lease renewal after which a node is NotReady (default 40 s).
	GracePeriod time.Duration
	// PodEvictionTimeout is how long pods with only the default toleration of the not-ready and
	// unreachable taints (or none) stay on such a node (default 300 s); pods that set their own
	// tolerationSeconds keep theirs.
	PodEvictionTimeout time.Duration
	// MonitorPeriod is how often every node is looked at again (default 5 s).
	MonitorPeriod time.Duration
	Workers       int
	Logger        *slog.Logger
}

type heard struct {
	renew time.Time // the lease's renewTime as last seen
	at    time.Time // when this controller saw it change
}

type controller struct {
	cfg    Config
	client *apiclient.Client
	nodes  *informer.Informer
	leases *informer.Informer
	pods   *informer.Informer
	queue  *controllerkit.Queue
	rec    *events.Recorder
	now    func() time.Time

	mu    sync.Mutex
	heard map[string]heard
}

// New returns the producer of the node lifecycle controller actor.
func New(cfg Config) func() actorkit.Actor {
	if cfg.GracePeriod <= 0 {
		cfg.GracePeriod = 40 * time.Second
	}
	if cfg.PodEvictionTimeout <= 0 {
		cfg.PodEvictionTimeout = 300 * time.Second
	}
	if cfg.MonitorPeriod <= 0 {
		cfg.MonitorPeriod = 5 * time.Second
	}
	c := &controller{
		cfg: cfg, client: cfg.Client,
		nodes:  cfg.Informers.For("", "nodes"),
		leases: cfg.Informers.For("coordination.k8s.io", "leases"),
		pods:   cfg.Informers.For("", "pods"),
		queue:  &controllerkit.Queue{},
		rec:    events.New(cfg.Client, Name, ""),
		now:    time.Now,
		heard:  map[string]heard{},
	}
	enqueueNode := func(o runtime.Object) { c.queue.Add(controllerkit.Meta(o).GetName()) }
	leaseSeen := func(o runtime.Object) {
		if l := o.(*coordv1.Lease); l.Namespace == LeaseNamespace {
			c.leaseSeen(l)
		}
	}
	c.pods.AddIndexer(informer.IndexNodeName, informer.PodNodeName)
	ctl := &controllerkit.Controller{
		Name:    Name,
		Workers: cfg.Workers,
		Watches: []controllerkit.Watch{
			{Informer: c.nodes, Handler: informer.Funcs{Add: enqueueNode, Update: func(_, o runtime.Object) { enqueueNode(o) }, Delete: func(o runtime.Object) {
				c.mu.Lock()
				delete(c.heard, o.(*corev1.Node).Name)
				c.mu.Unlock()
			}}},
			{Informer: c.leases, Handler: informer.Funcs{Add: leaseSeen, Update: func(_, o runtime.Object) { leaseSeen(o) }}},
			// A pod landing on a tainted node needs its eviction timer.
			{Informer: c.pods, Handler: informer.Funcs{Add: c.podSeen, Update: func(_, o runtime.Object) { c.podSeen(o) }}},
		},
		Queue:       c.queue,
		Reconcile:   c.sync,
		Resync:      controllerkit.ForEach(c.nodes, c.enqueueUnlessQuiet),
		ResyncEvery: cfg.MonitorPeriod,
		Logger:      cfg.Logger,
	}
	return ctl.Producer()
}

// leaseSeen records the local time at which a renewal was observed: comparing local times
// keeps clock skew between the kubelet and this controller out of the decision.
func (c *controller) leaseSeen(l *coordv1.Lease) {
	var renew time.Time
	if l.Spec.RenewTime != nil {
		renew = l.Spec.RenewTime.Time
	}
	now := c.now()
	c.mu.Lock()
	h, ok := c.heard[l.Name]
	if !ok || !h.renew.Equal(renew) {
		c.heard[l.Name] = heard{renew: renew, at: now}
	}
	c.mu.Unlock()
	// A renewal of a node in good standing changes no decision: the check already queued for
	// its grace deadline finds it fresh and moves the deadline. Only a node heard for the
	// first time, or again after it went silent, is looked at now (500 renewals a second at
	// 5,000 nodes would otherwise be 500 reconciles a second).
	if !ok || now.Sub(h.at) >= c.cfg.GracePeriod {
		c.queue.Add(l.Name)
	}
}

// enqueueUnlessQuiet is the periodic resync's filter. A quiet node (heard within the grace
// period, Ready, none of this controller's taints, no NoExecute taint) is one sync would leave
// as it is, and its grace deadline is already queued by its last sync, so the resync skips it:
// at 5,000 nodes every 5 s it would otherwise be 1,000 reconciles a second that change nothing.
// kube-controller-manager's monitorNodeHealth likewise writes only for nodes whose state moved.
func (c *controller) enqueueUnlessQuiet(o runtime.Object) {
	n := o.(*corev1.Node)
	c.mu.Lock()
	h, heardOf := c.heard[n.Name]
	c.mu.Unlock()
	quiet := heardOf && c.now().Sub(h.at) < c.cfg.GracePeriod && readyStatus(n) == corev1.ConditionTrue && !hasNoExecute(n) && !hasManagedTaint(n)
	if !quiet {
		c.queue.Add(n.Name)
	}
}

// lastHeard: the last observed renewal; a node never heard of gets a full grace period from now.
func (c *controller) lastHeard(node string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.heard[node]
	if !ok {
		h = heard{at: c.now()}
		c.heard[node] = h
	}
	return h.at
}

func (c *controller) podSeen(o runtime.Object) {
	p := o.(*corev1.Pod)
	if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
		return
	}
	if n, ok := c.nodes.Get("", p.Spec.NodeName); ok && hasNoExecute(n.(*corev1.Node)) {
		c.queue.Add(p.Spec.NodeName)
	}
}

func hasManagedTaint(n *corev1.Node) bool {
	for i := range n.Spec.Taints {
		for j := range managed {
			if n.Spec.Taints[i].MatchTaint(&managed[j]) {
				return true
			}
		}
	}
	return false
}

func hasNoExecute(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}
