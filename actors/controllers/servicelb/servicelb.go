// Package servicelb is Skiff's built-in LoadBalancer, as k3s's ServiceLB without its pods: a
// LoadBalancer Service gets the nodes' addresses (ExternalIP, else InternalIP) in
// status.loadBalancer.ingress, and every node's proxy serves the Service's ports on its own
// address (actors/proxy: the socket LB for local clients, tc programs for outside traffic).
// Two LoadBalancers cannot share a port and protocol on the same addresses: the older one
// (by creation, then name) keeps it, the other stays pending until the port is free.
package servicelb

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Name is the controller's name in logs.
const Name = "service-lb-controller"

// byPort indexes LoadBalancer Services by "<protocol>/<port>" of each of their ports; byType
// files them all under one key, so a node change reaches them without listing every Service.
const (
	byPort = "lb-port"
	byType = "lb-type"
)

type controller struct {
	cfg   controllerkit.Config
	svcs  informer.Typed[*corev1.Service]
	nodes informer.Typed[*corev1.Node]
	queue *controllerkit.Queue

	mu    sync.Mutex
	addrs map[string][]string // node name -> its LoadBalancer addresses
	// all is every node's, sorted and unique, rebuilt by the first sync that needs it after a
	// change: registering thousands of nodes must not sort them all once per node.
	all      []string
	allStale bool
}

// New returns the producer of the controller actor; its queue holds Service keys.
func New(cfg controllerkit.Config) func() actorkit.Actor {
	c := &controller{
		cfg:   cfg,
		svcs:  informer.Shared[*corev1.Service](cfg.Informers, "", "services"),
		nodes: informer.Shared[*corev1.Node](cfg.Informers, "", "nodes"),
		queue: &controllerkit.Queue{},
		addrs: map[string][]string{},
	}
	c.svcs.AddIndexer(byPort, func(s *corev1.Service) []string { return portKeys(s) })
	c.svcs.AddIndexer(byType, func(s *corev1.Service) []string {
		if isLB(s) {
			return []string{string(corev1.ServiceTypeLoadBalancer)}
		}
		return nil
	})
	// A Service that stopped being a LoadBalancer is enqueued too: its ingress goes.
	onSvc := func(o runtime.Object) {
		if s := o.(*corev1.Service); isLB(s) || len(s.Status.LoadBalancer.Ingress) > 0 {
			c.queue.Add(controllerkit.KeyOf(s))
		}
	}
	// A Service that leaves a port (deleted, changed) may free it for another.
	onSvcChange := func(old, cur runtime.Object) {
		onSvc(cur)
		for _, k := range portKeys(old.(*corev1.Service)) {
			for _, s := range c.svcs.ByIndex(byPort, k) {
				c.queue.Add(controllerkit.KeyOf(s))
			}
		}
	}
	ctl := &controllerkit.Controller{
		Name:    Name,
		Workers: cfg.Workers,
		Watches: []controllerkit.Watch{
			{Informer: c.svcs.Informer(), Handler: informer.Funcs{Add: onSvc, Update: onSvcChange,
				Delete: func(o runtime.Object) { onSvcChange(o, o) }}},
			{Informer: c.nodes.Informer(), Handler: informer.Funcs{
				Add:    func(o runtime.Object) { c.nodeChanged(o.(*corev1.Node), false) },
				Update: func(_, o runtime.Object) { c.nodeChanged(o.(*corev1.Node), false) },
				Delete: func(o runtime.Object) { c.nodeChanged(o.(*corev1.Node), true) },
			}},
		},
		Queue:     c.queue,
		Reconcile: c.sync,
		Resync:    controllerkit.ForEach(c.svcs.Informer(), onSvc),
		Logger:    cfg.Logger,
	}
	return ctl.Producer()
}

func isLB(s *corev1.Service) bool { return s.Spec.Type == corev1.ServiceTypeLoadBalancer }

func portKeys(s *corev1.Service) []string {
	if !isLB(s) {
		return nil
	}
	var out []string
	for _, p := range s.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		out = append(out, string(proto)+"/"+strconv.Itoa(int(p.Port)))
	}
	return out
}

// nodeChanged keeps the address set; only a change of it touches the LoadBalancers (heartbeats
// do not), and then every one of them.
func (c *controller) nodeChanged(n *corev1.Node, gone bool) {
	var addrs []string
	if !gone {
		addrs = lbAddresses(n)
	}
	c.mu.Lock()
	if slices.Equal(c.addrs[n.Name], addrs) {
		c.mu.Unlock()
		return
	}
	if len(addrs) == 0 {
		delete(c.addrs, n.Name)
	} else {
		c.addrs[n.Name] = addrs
	}
	c.allStale = true
	c.mu.Unlock()
	for _, s := range c.svcs.ByIndex(byType, string(corev1.ServiceTypeLoadBalancer)) {
		c.queue.Add(controllerkit.KeyOf(s))
	}
}

// lbAddresses are a node's ExternalIPs, or its InternalIPs when it has none (k3s's choice).
func lbAddresses(n *corev1.Node) []string {
	var ext, in []string
	for _, a := range n.Status.Addresses {
		if _, err := netip.ParseAddr(a.Address); err != nil {
			continue
		}
		switch a.Type {
		case corev1.NodeExternalIP:
			ext = append(ext, a.Address)
		case corev1.NodeInternalIP:
			in = append(in, a.Address)
		}
	}
	if len(ext) > 0 {
		in = ext
	}
	slices.SortFunc(in, compareAddrs)
	return slices.Compact(in)
}

func compareAddrs(a, b string) int {
	return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b))
}

// allAddrs returns every node's addresses, sorted and unique; c.mu is held.
func (c *controller) allAddrs() []string {
	if !c.allStale {
		return c.all
	}
	var all []netip.Addr
	for _, as := range c.addrs {
		for _, a := range as {
			all = append(all, netip.MustParseAddr(a)) // lbAddresses keeps only parsable ones
		}
	}
	slices.SortFunc(all, netip.Addr.Compare)
	all = slices.Compact(all)
	c.all = make([]string, len(all))
	for i, a := range all {
		c.all[i] = a.String()
	}
	c.allStale = false
	return c.all
}

func (c *controller) sync(ctx context.Context, key string) error {
	ns, name := controllerkit.SplitKey(key)
	svc, ok := c.svcs.Get(ns, name)
	if !ok {
		return nil
	}
	var ingress []corev1.LoadBalancerIngress
	if isLB(svc) && c.holdsPorts(svc) {
		c.mu.Lock()
		for _, a := range c.allAddrs() {
			ingress = append(ingress, corev1.LoadBalancerIngress{IP: a, IPMode: ptrTo(corev1.LoadBalancerIPModeVIP)})
		}
		c.mu.Unlock()
	}
	if equality.Semantic.DeepEqual(svc.Status.LoadBalancer.Ingress, ingress) {
		return nil
	}
	next := svc.DeepCopy()
	next.Status.LoadBalancer.Ingress = ingress
	_, err := c.cfg.Client.UpdateStatus(ctx, next)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// holdsPorts: no older LoadBalancer uses any of svc's ports.
func (c *controller) holdsPorts(svc *corev1.Service) bool {
	for _, k := range portKeys(svc) {
		for _, o := range c.svcs.ByIndex(byPort, k) {
			if o.UID != svc.UID && older(o, svc) {
				return false
			}
		}
	}
	return true
}

func older(a, b *corev1.Service) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return controllerkit.KeyOf(a) < controllerkit.KeyOf(b)
}

func ptrTo[T any](v T) *T { return &v }
