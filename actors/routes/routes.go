// Package routes is the node agent's route actor: on each node, a route to every other Ready
// node's pod CIDR via its InternalIP, and the masquerade exemption for pod-to-pod traffic.
package routes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
)

// routeProtocol tags the routes this agent programs (rtnetlink protocol number), so it finds
// and removes its own routes without touching anyone else's.
const routeProtocol = netlink.RouteProtocol(0x73)

// masqChain holds one ACCEPT per other node's pod CIDR. It is jumped to from nat POSTROUTING
// ahead of the CNI bridge's masquerade rules (ACCEPT ends the nat traversal, RETURN would fall
// through to them), so pod-to-pod traffic between nodes keeps the client pod's address and only
// traffic leaving the pod networks is masqueraded.
const masqChain = "SKIFF-POD-CIDRS"

// podRoutes keeps, on this node, a route to every other Ready node's spec.podCIDR via that
// node's InternalIP (host-gateway routing, as flannel's host-gw backend does): nodes that
// share an L2 segment reach each other's pods with no overlay.
type podRoutes struct {
	self, podCIDR string
	env           Env
	nodes         *informer.Informer
	queue         *controllerkit.Queue
	logger        *slog.Logger
}

// Env is where routes and rules are programmed; the zero value is this process's netns.
type Env struct {
	Netlink  *netlink.Handle // nil: this process's netns
	IPTables []string        // the iptables command; nil: iptables from PATH
}

// New returns the producer of the route actor of node self, whose pods use podCIDR.
func New(informers *informer.Factory, self, podCIDR string, env Env, logger *slog.Logger) (func() actorkit.Actor, error) {
	if _, _, err := net.ParseCIDR(podCIDR); err != nil {
		return nil, fmt.Errorf("pod CIDR: %w", err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	if env.Netlink == nil {
		env.Netlink = &netlink.Handle{} // sockets opened per call, in the caller's netns
	}
	if env.IPTables == nil {
		if _, err := exec.LookPath("iptables"); err == nil {
			env.IPTables = []string{"iptables"}
		}
	}
	r := &podRoutes{self: self, podCIDR: podCIDR, env: env, nodes: informers.For("", "nodes"), queue: &controllerkit.Queue{}, logger: logger}
	enqueue := func(runtime.Object) { r.queue.Add("routes") }
	nodes := informer.Funcs{Add: enqueue, Delete: enqueue, Update: func(old, o runtime.Object) {
		if routeChanged(old.(*corev1.Node), o.(*corev1.Node)) {
			enqueue(o)
		}
	}}
	ctl := &controllerkit.Controller{
		Name: "routes/" + self, Workers: 1, Watches: []controllerkit.Watch{{Informer: r.nodes, Handler: nodes}}, Queue: r.queue,
		Reconcile: func(ctx context.Context, _ string) error { return r.sync(ctx) },
		// Resync puts back a route someone deleted by hand.
		Resync: func() { r.queue.Add("routes") }, ResyncEvery: 30 * time.Second,
		Logger: logger,
	}
	return ctl.Producer(), nil
}

// routeChanged: only a node's pod CIDR, addresses and readiness move routes, not heartbeats.
func routeChanged(old, cur *corev1.Node) bool {
	return old.Spec.PodCIDR != cur.Spec.PodCIDR || controllerkit.IsNodeReady(old) != controllerkit.IsNodeReady(cur) ||
		!apiequality.Semantic.DeepEqual(old.Status.Addresses, cur.Status.Addresses)
}

// wanted maps each other Ready node's pod CIDR to its InternalIP.
func (r *podRoutes) wanted() map[string]net.IP {
	_, own, _ := net.ParseCIDR(r.podCIDR)
	out := map[string]net.IP{}
	for _, o := range r.nodes.List(nil) {
		n := o.(*corev1.Node)
		if n.Name == r.self || !controllerkit.IsNodeReady(n) {
			continue
		}
		_, cidr, err := net.ParseCIDR(n.Spec.PodCIDR)
		if err != nil || cidr.IP.To4() == nil || cidr.Contains(own.IP) || own.Contains(cidr.IP) {
			continue // no range, or one overlapping ours: a route would steal our own pods
		}
		if gw := internalIP(n); gw != nil {
			out[cidr.String()] = gw
		}
	}
	return out
}

func (r *podRoutes) sync(context.Context) error {
	want := r.wanted()
	nl := r.env.Netlink
	have, err := nl.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: routeProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	var errs []error
	for _, rt := range have {
		if gw, ok := want[rt.Dst.String()]; ok && gw.Equal(rt.Gw) {
			delete(want, rt.Dst.String())
			continue
		}
		if err := nl.RouteDel(&rt); err != nil {
			errs = append(errs, fmt.Errorf("delete route %s: %w", rt.Dst, err))
		} else {
			r.logger.Info("routes: removed", "node", r.self, "dst", rt.Dst.String())
		}
	}
	for dst, gw := range want {
		_, ipnet, _ := net.ParseCIDR(dst)
		if err := nl.RouteReplace(&netlink.Route{Dst: ipnet, Gw: gw, Protocol: routeProtocol}); err != nil {
			errs = append(errs, fmt.Errorf("route %s via %s: %w", dst, gw, err))
		} else {
			r.logger.Info("routes: added", "node", r.self, "dst", dst, "via", gw.String())
		}
	}
	errs = append(errs, r.syncMasq())
	return errors.Join(errs...)
}

// syncMasq makes masqChain hold exactly one ACCEPT per remote pod CIDR routed here.
func (r *podRoutes) syncMasq() error {
	if r.env.IPTables == nil {
		return nil // no iptables: the CNI bridge could not masquerade either
	}
	ipt := func(args ...string) (string, error) {
		argv := append(append(append([]string(nil), r.env.IPTables...), "-w", "-t", "nat"), args...)
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return string(out), nil
	}
	if _, err := ipt("-S", masqChain); err != nil {
		if _, err := ipt("-N", masqChain); err != nil {
			return err
		}
	}
	if _, err := ipt("-C", "POSTROUTING", "-s", r.podCIDR, "-j", masqChain); err != nil {
		if _, err := ipt("-I", "POSTROUTING", "1", "-s", r.podCIDR, "-j", masqChain); err != nil {
			return err
		}
	}
	want := map[string]bool{}
	for dst := range r.wanted() {
		want[dst] = true
	}
	rules, err := ipt("-S", masqChain)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(rules, "\n") {
		f := strings.Fields(line)
		// -A SKIFF-POD-CIDRS -d 10.1.2.0/24 -j ACCEPT
		if len(f) != 6 || f[0] != "-A" || f[2] != "-d" {
			continue
		}
		if want[f[3]] {
			delete(want, f[3])
		} else if _, err := ipt("-D", masqChain, "-d", f[3], "-j", "ACCEPT"); err != nil {
			return err
		}
	}
	for dst := range want {
		if _, err := ipt("-A", masqChain, "-d", dst, "-j", "ACCEPT"); err != nil {
			return err
		}
	}
	return nil
}

func internalIP(n *corev1.Node) net.IP {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			if ip := net.ParseIP(a.Address).To4(); ip != nil {
				return ip
			}
		}
	}
	return nil
}
