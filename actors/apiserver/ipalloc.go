package apiserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// ipAllocator hands out ClusterIPs. Each allocated IP is a key of its own in the state log,
// created with compare-and-swap, so two apiserver replicas can never hand out the same IP
// (the same idea as Kubernetes' IPAddress objects).
type ipAllocator struct {
	log    *statelog.Log
	prefix netip.Prefix
	size   uint32
	base   uint32
}

const ipKeyPrefix = "internal/serviceips/_/"

func newIPAllocator(log *statelog.Log, cidr string) (*ipAllocator, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() || p.Bits() > 30 {
		return nil, fmt.Errorf("service CIDR %q must be an IPv4 prefix of /30 or larger", cidr)
	}
	p = p.Masked()
	a := p.Addr().As4()
	return &ipAllocator{log: log, prefix: p, size: 1 << (32 - p.Bits()), base: binary.BigEndian.Uint32(a[:])}, nil
}

func (a *ipAllocator) reserve(ctx context.Context, ip netip.Addr, owner string) error {
	_, err := a.log.Create(ctx, ipKeyPrefix+ip.String(), []byte(owner), nil)
	return err
}

// allocate picks a free address; the network address, the first host (the "kubernetes"
// service's, by convention) and the tenth (kube-dns's) are never handed out.
func (a *ipAllocator) allocate(ctx context.Context, owner string) (netip.Addr, error) {
	for range 64 {
		off := 2 + rand.Uint32N(a.size-3)
		if off == 10 {
			continue
		}
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], a.base+off)
		ip := netip.AddrFrom4(b)
		err := a.reserve(ctx, ip, owner)
		if err == nil {
			return ip, nil
		}
		if !errors.Is(err, statelog.ErrExists) {
			return netip.Addr{}, err
		}
	}
	return netip.Addr{}, fmt.Errorf("no free ClusterIP found in %s", a.prefix)
}

func (a *ipAllocator) release(ctx context.Context, ip string) {
	_, _ = a.log.Delete(ctx, ipKeyPrefix+ip, 0, nil)
}

// allocateFor gives a new Service its ClusterIP and node ports; the returned func undoes it if
// the write fails.
func (s *Server) allocateFor(ctx context.Context, k *schemas.Kind, obj runtime.Object, dryRun bool) (func(), error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return func() {}, nil
	}
	releaseIP, err := s.allocateClusterIP(ctx, k, svc, dryRun)
	if err != nil {
		return nil, err
	}
	undo, _, err := s.assignNodePorts(ctx, k, nil, svc, dryRun)
	if err != nil {
		releaseIP()
		return nil, err
	}
	return func() { undo(); releaseIP() }, nil
}

// reallocateFor gives an updated Service the node ports its new spec needs: undo frees what it
// took should the write fail, done frees what the old spec held and the new one does not.
func (s *Server) reallocateFor(ctx context.Context, k *schemas.Kind, cur, next runtime.Object, dryRun bool) (undo, done func(), err error) {
	c, ok1 := cur.(*corev1.Service)
	n, ok2 := next.(*corev1.Service)
	if !ok1 || !ok2 {
		return func() {}, func() {}, nil
	}
	return s.assignNodePorts(ctx, k, c, n, dryRun)
}

func (s *Server) allocateClusterIP(ctx context.Context, k *schemas.Kind, svc *corev1.Service, dryRun bool) (func(), error) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return func() {}, nil
	}
	owner := svc.Namespace + "/" + svc.Name
	path := field.NewPath("spec", "clusterIP")
	if svc.Spec.ClusterIP != "" {
		ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		if err != nil || !s.ips.prefix.Contains(ip) {
			return nil, invalid(k, svc.Name, field.ErrorList{field.Invalid(path, svc.Spec.ClusterIP, "must be an address in the service CIDR "+s.ips.prefix.String())})
		}
		if dryRun {
			return func() {}, nil
		}
		if err := s.ips.reserve(ctx, ip, owner); errors.Is(err, statelog.ErrExists) {
			return nil, invalid(k, svc.Name, field.ErrorList{field.Invalid(path, svc.Spec.ClusterIP, "provided IP is already allocated")})
		} else if err != nil {
			return nil, writeFailed(err)
		}
	} else {
		if dryRun {
			return func() {}, nil
		}
		ip, err := s.ips.allocate(ctx, owner)
		if err != nil {
			return nil, writeFailed(err)
		}
		svc.Spec.ClusterIP = ip.String()
	}
	svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	ip := svc.Spec.ClusterIP
	return func() { s.ips.release(context.WithoutCancel(ctx), ip) }, nil
}

// releaseFor frees what a deleted object held.
func (s *Server) releaseFor(ctx context.Context, k *schemas.Kind, obj runtime.Object) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	if svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		s.ips.release(context.WithoutCancel(ctx), svc.Spec.ClusterIP)
	}
	for p := range heldNodePorts(svc) {
		s.nodePorts.release(context.WithoutCancel(ctx), p)
	}
}
