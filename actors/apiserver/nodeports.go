package apiserver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// DefaultNodePortRange is kube-apiserver's --service-node-port-range default.
const DefaultNodePortRange = "30000-32767"

const nodePortKeyPrefix = "internal/servicenodeports/_/"

// portAllocator hands out node ports as ipAllocator hands out ClusterIPs: one state-log key
// per port, created with compare-and-swap, so no two replicas give one port to two Services.
// A port is the node's for every protocol, as in Kubernetes.
type portAllocator struct {
	log    *statelog.Log
	lo, hi int32
}

// ParsePortRange reads "LO-HI" (both inclusive, 1-65535).
func ParsePortRange(s string) (lo, hi int32, err error) {
	a, b, ok := strings.Cut(s, "-")
	l, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 16)
	h, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 16)
	if !ok || err1 != nil || err2 != nil || l == 0 || h < l {
		return 0, 0, fmt.Errorf("node port range %q must be LOW-HIGH with 1 <= LOW <= HIGH <= 65535", s)
	}
	return int32(l), int32(h), nil
}

func newPortAllocator(log *statelog.Log, r string) (*portAllocator, error) {
	lo, hi, err := ParsePortRange(r)
	if err != nil {
		return nil, err
	}
	return &portAllocator{log: log, lo: lo, hi: hi}, nil
}

func (a *portAllocator) String() string { return fmt.Sprintf("%d-%d", a.lo, a.hi) }

func (a *portAllocator) contains(p int32) bool { return p >= a.lo && p <= a.hi }

func (a *portAllocator) key(p int32) string { return nodePortKeyPrefix + strconv.Itoa(int(p)) }

func (a *portAllocator) reserve(ctx context.Context, p int32, owner string) error {
	_, err := a.log.Create(ctx, a.key(p), []byte(owner), nil)
	return err
}

func (a *portAllocator) taken(ctx context.Context, p int32) (bool, error) {
	_, err := a.log.Get(ctx, a.key(p), statelog.ReadOptions{})
	if errors.Is(err, statelog.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// allocate tries random ports first, then walks the whole range from a random start, so a
// nearly full range still finds its last free port.
func (a *portAllocator) allocate(ctx context.Context, owner string) (int32, error) {
	n := a.hi - a.lo + 1
	start := rand.Int32N(n)
	for i := range n {
		off := (start + i) % n
		if i < 32 {
			off = rand.Int32N(n)
		}
		err := a.reserve(ctx, a.lo+off, owner)
		if err == nil {
			return a.lo + off, nil
		}
		if !errors.Is(err, statelog.ErrExists) {
			return 0, err
		}
	}
	return 0, fmt.Errorf("no free node port in the range %s", a)
}

func (a *portAllocator) release(ctx context.Context, p int32) {
	_, _ = a.log.Delete(ctx, a.key(p), 0, nil)
}

// wantsNodePorts: NodePort Services and LoadBalancers that did not opt out.
func wantsNodePorts(svc *corev1.Service) bool {
	sp := &svc.Spec
	return sp.Type == corev1.ServiceTypeNodePort ||
		sp.Type == corev1.ServiceTypeLoadBalancer && (sp.AllocateLoadBalancerNodePorts == nil || *sp.AllocateLoadBalancerNodePorts)
}

// wantsHealthCheck: a LoadBalancer that sends outside traffic only to local endpoints.
func wantsHealthCheck(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// heldNodePorts are the node ports a stored Service holds.
func heldNodePorts(svc *corev1.Service) sets.Set[int32] {
	held := sets.New[int32]()
	if svc == nil {
		return held
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 {
			held.Insert(p.NodePort)
		}
	}
	if svc.Spec.HealthCheckNodePort != 0 {
		held.Insert(svc.Spec.HealthCheckNodePort)
	}
	return held
}

// assignNodePorts gives next (cur's update, or a new Service when cur is nil) its node ports:
// those cur holds are kept, requested ones are checked against the range and reserved, missing
// ones allocated (schemas.DefaultUpdate has carried cur's over to next). undo releases what it reserved (the write failed); done releases what cur held
// and next no longer does (the write took).
func (s *Server) assignNodePorts(ctx context.Context, k *schemas.Kind, cur, next *corev1.Service, dryRun bool) (undo, done func(), err error) {
	owner := next.Namespace + "/" + next.Name
	held := heldNodePorts(cur)
	var reserved []int32
	undo = func() {
		for _, p := range reserved {
			s.nodePorts.release(context.WithoutCancel(ctx), p)
		}
	}
	// claim checks and reserves one requested port (one next holds already passes).
	claim := func(p int32, path *field.Path) error {
		if held.Has(p) || slices.Contains(reserved, p) {
			return nil
		}
		if !s.nodePorts.contains(p) {
			return invalid(k, next.Name, field.ErrorList{field.Invalid(path, p,
				"provided port is not in the valid range. The range of valid ports is "+s.nodePorts.String())})
		}
		var err error
		if dryRun {
			var taken bool
			if taken, err = s.nodePorts.taken(ctx, p); err == nil && taken {
				err = statelog.ErrExists
			}
		} else if err = s.nodePorts.reserve(ctx, p, owner); err == nil {
			reserved = append(reserved, p)
		}
		if errors.Is(err, statelog.ErrExists) {
			return invalid(k, next.Name, field.ErrorList{field.Invalid(path, p, "provided port is already allocated")})
		}
		if err != nil {
			return writeFailed(err)
		}
		return nil
	}
	fill := func(p *int32, path *field.Path) error {
		if *p != 0 {
			return claim(*p, path)
		}
		if dryRun {
			return nil
		}
		np, err := s.nodePorts.allocate(ctx, owner)
		if err != nil {
			return writeFailed(err)
		}
		reserved = append(reserved, np)
		*p = np
		return nil
	}
	for i := range next.Spec.Ports {
		p := &next.Spec.Ports[i].NodePort
		if *p == 0 && !wantsNodePorts(next) {
			continue
		}
		if err := fill(p, field.NewPath("spec", "ports").Index(i).Child("nodePort")); err != nil {
			undo()
			return nil, nil, err
		}
	}
	if wantsHealthCheck(next) {
		if err := fill(&next.Spec.HealthCheckNodePort, field.NewPath("spec", "healthCheckNodePort")); err != nil {
			undo()
			return nil, nil, err
		}
	}
	gone := held.Difference(heldNodePorts(next))
	done = func() {
		for p := range gone {
			s.nodePorts.release(context.WithoutCancel(ctx), p)
		}
	}
	return undo, done, nil
}
