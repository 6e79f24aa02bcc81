package proxy

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bpf/lb"
	"github.com/skiff-sh/skiff/bpf/nodeport"
)

// podPrefix marks a pod's key in the work queue and the ownership maps: a pod with hostPorts
// owns entries as a Service does.
const podPrefix = "pod:"

func podKey(p *corev1.Pod) string { return podPrefix + keyOf(p.Namespace, p.Name) }

// HostPorts is what a pod of this node needs for its containers' hostPorts: each
// <address>:<hostPort> (the hostIP, or every node address) goes to <pod IP>:<containerPort>,
// through the socket LB for local clients and the tc programs for outside ones, as portmap's
// DNAT would. A pod without an IP yet, or finished, has none.
func HostPorts(p *corev1.Pod, nodeIPs []netip.Addr) (map[lb.ServiceKey]lb.ServiceSpec, map[nodeport.Key][]nodeport.Backend) {
	sock, tc := map[lb.ServiceKey]lb.ServiceSpec{}, map[nodeport.Key][]nodeport.Backend{}
	podIP, err := netip.ParseAddr(p.Status.PodIP)
	if err != nil || !podIP.Is4() || p.Spec.HostNetwork || p.DeletionTimestamp != nil ||
		p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return sock, tc
	}
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			proto, ok := protoOf(cp.Protocol)
			if !ok || cp.HostPort <= 0 || cp.HostPort > 65535 || cp.ContainerPort <= 0 {
				continue
			}
			at := nodeIPs
			if ip, err := netip.ParseAddr(cp.HostIP); err == nil && !ip.IsUnspecified() {
				at = []netip.Addr{ip.Unmap()}
			}
			for _, ip := range at {
				be := lb.Backend{Addr: podIP, Port: uint16(cp.ContainerPort)}
				sock[lb.ServiceKey{VIP: ip, Port: uint16(cp.HostPort), Proto: proto}] = lb.ServiceSpec{Backends: []lb.Backend{be}}
				tc[nodeport.Key{Addr: ip, Port: uint16(cp.HostPort), Proto: proto}] = []nodeport.Backend{{Addr: podIP, Port: be.Port, Local: true}}
			}
		}
	}
	return sock, tc
}

// hasHostPorts: a pod whose entries the proxy must (re)write.
func hasHostPorts(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.HostPort > 0 {
				return true
			}
		}
	}
	return false
}

// podHandler enqueues this node's pods with hostPorts (nil: hostPorts are not served).
func (p *Proxy) podHandler() informer.Handler {
	changed := func(o runtime.Object) {
		if pod := o.(*corev1.Pod); pod.Spec.NodeName == p.cfg.NodeName && hasHostPorts(pod) {
			p.enqueue(podKey(pod))
		}
	}
	return informer.Funcs{Add: changed, Update: func(_, o runtime.Object) { changed(o) }, Delete: changed}
}

// desiredFor computes the entries of a queue key: a pod's hostPorts or a Service's.
func (p *Proxy) desiredFor(key string) (*corev1.Service, map[lb.ServiceKey]lb.ServiceSpec, map[nodeport.Key][]nodeport.Backend) {
	if pk, ok := strings.CutPrefix(key, podPrefix); ok {
		if p.pods != nil && len(p.cfg.NodeIPs) > 0 {
			if o, ok := p.pods.Get(splitKey(pk)); ok {
				sock, tc := HostPorts(o.(*corev1.Pod), p.cfg.NodeIPs)
				return nil, sock, tc
			}
		}
		return nil, map[lb.ServiceKey]lb.ServiceSpec{}, nil
	}
	if o, ok := p.svcs.Get(splitKey(key)); ok {
		svc := o.(*corev1.Service)
		sock, tc := p.desired(svc)
		return svc, sock, tc
	}
	return nil, map[lb.ServiceKey]lb.ServiceSpec{}, nil
}

// hostPortPods are this node's pods with hostPorts, for a resync.
func (p *Proxy) hostPortPods() []*corev1.Pod {
	if p.pods == nil || len(p.cfg.NodeIPs) == 0 {
		return nil
	}
	var out []*corev1.Pod
	for _, o := range p.pods.ByIndex(informer.IndexNodeName, p.cfg.NodeName) {
		if pod := o.(*corev1.Pod); hasHostPorts(pod) {
			out = append(out, pod)
		}
	}
	return out
}
