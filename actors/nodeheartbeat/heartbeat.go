// Package nodeheartbeat is the node heartbeat that the kubelet and the simulated nodes share:
// register the Node, renew its Lease in kube-node-lease every renew interval (what the node
// lifecycle controller reads for liveness), and post the node status only when it changed or
// is older than the status interval, as the Kubernetes kubelet does.
package nodeheartbeat

import (
	"context"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
)

// LeaseNamespace holds one heartbeat Lease per node, named after it.
const LeaseNamespace = corev1.NamespaceNodeLease

// Heartbeat keeps nodes alive through one client. It is safe for concurrent use by many nodes;
// it remembers each node's last written Lease so a renewal is one write, not a read and a write.
type Heartbeat struct {
	Client *apiclient.Client
	Nodes  informer.Typed[*corev1.Node]
	// LeaseDuration is written into each Lease; StatusInterval is how old the Ready condition's
	// heartbeat may grow before the status is posted again.
	LeaseDuration  time.Duration
	StatusInterval time.Duration
	ReadyMessage   string // the Ready condition's message

	mu     sync.Mutex
	leases map[string]*coordv1.Lease
	nodes  map[string]*corev1.Node // last written, until the informer has the node
}

var (
	leaseKind = controllerkit.MustKind("coordination.k8s.io", "leases")
	nodeKind  = controllerkit.MustKind("", "nodes")
)

// Register returns the named node, creating it from template() if it does not exist.
func (h *Heartbeat) Register(ctx context.Context, name string, template func() *corev1.Node) (*corev1.Node, error) {
	if n, ok := h.node(name); ok {
		return n, nil
	}
	o, err := h.Client.Create(ctx, template())
	if apierrors.IsAlreadyExists(err) {
		o, err = h.Client.Get(ctx, nodeKind, "", name)
	}
	if err != nil {
		return nil, err
	}
	n := o.(*corev1.Node)
	h.remember(n)
	return n, nil
}

// node prefers the informer's copy (it sees what others, e.g. the node lifecycle controller,
// wrote), then this heartbeat's last write until the informer has caught up with it (after
// which a node gone from the informer is gone, and is registered again).
func (h *Heartbeat) node(name string) (*corev1.Node, bool) {
	cached, inCache := h.Nodes.Get("", name)
	h.mu.Lock()
	defer h.mu.Unlock()
	if inCache {
		delete(h.nodes, name)
		return cached, true
	}
	n, ok := h.nodes[name]
	return n, ok
}

func (h *Heartbeat) remember(n *corev1.Node) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.nodes == nil {
		h.nodes = map[string]*corev1.Node{}
	}
	h.nodes[n.Name] = n
}

// StatusDue reports whether n's status must be posted: it is not Ready (never posted, or
// someone else marked it otherwise) or its heartbeat is older than StatusInterval.
func (h *Heartbeat) StatusDue(n *corev1.Node) bool {
	c := readyCondition(n)
	return c == nil || c.Status != corev1.ConditionTrue || time.Since(c.LastHeartbeatTime.Time) >= h.StatusInterval
}

// PostStatus writes n's status: set fills capacity, addresses and node info; the heartbeat sets
// the conditions (healthy, Ready, heartbeat now, transition times kept).
func (h *Heartbeat) PostStatus(ctx context.Context, n *corev1.Node, set func(*corev1.Node)) (*corev1.Node, error) {
	next := n.DeepCopy()
	set(next)
	next.Status.Conditions = h.conditions(n.Status.Conditions, metav1.Now())
	o, err := h.Client.UpdateStatus(ctx, next)
	if err != nil {
		return nil, err
	}
	out := o.(*corev1.Node)
	h.remember(out)
	return out, nil
}

// Ready reports whether n's Ready condition is True.
func Ready(n *corev1.Node) bool {
	c := readyCondition(n)
	return c != nil && c.Status == corev1.ConditionTrue
}

func readyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func (h *Heartbeat) conditions(old []corev1.NodeCondition, now metav1.Time) []corev1.NodeCondition {
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		c := corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
		for _, o := range old {
			if o.Type == t && o.Status == s {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		return c
	}
	return []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", h.ReadyMessage),
	}
}

// RenewLease sets the node's Lease renewTime to now, creating the Lease (owned by the Node) if
// there is none. A renewal writes over the Lease last written; if that is stale (a conflict, or
// the Lease is gone) it reads it once and tries again, so one lost race costs no renew interval.
func (h *Heartbeat) RenewLease(ctx context.Context, name string) error {
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		var l *coordv1.Lease
		if l, err = h.lease(ctx, name); err != nil || l == nil {
			return err // created (l == nil) or failed
		}
		now := metav1.NewMicroTime(time.Now())
		next := l.DeepCopy()
		next.Spec.RenewTime = &now
		next.Spec.HolderIdentity = ptr.To(name)
		o, uerr := h.Client.Update(ctx, next)
		if err = uerr; err == nil {
			h.setLease(name, o.(*coordv1.Lease))
			return nil
		}
		h.setLease(name, nil)
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return err
}

// lease returns the Lease to renew, or nil once it created a fresh one.
func (h *Heartbeat) lease(ctx context.Context, name string) (*coordv1.Lease, error) {
	h.mu.Lock()
	l := h.leases[name]
	h.mu.Unlock()
	if l != nil {
		return l, nil
	}
	o, err := h.Client.Get(ctx, leaseKind, LeaseNamespace, name)
	if err == nil {
		return o.(*coordv1.Lease), nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	now := metav1.NewMicroTime(time.Now())
	fresh := &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: LeaseNamespace},
		Spec: coordv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(int32(h.LeaseDuration / time.Second)),
			AcquireTime: &now, RenewTime: &now},
	}
	if n, ok := h.node(name); ok {
		fresh.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
	}
	o, err = h.Client.Create(ctx, fresh)
	if err != nil {
		return nil, err
	}
	h.setLease(name, o.(*coordv1.Lease))
	return nil, nil
}

func (h *Heartbeat) setLease(name string, l *coordv1.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.leases == nil {
		h.leases = map[string]*coordv1.Lease{}
	}
	if l == nil {
		delete(h.leases, name)
		return
	}
	h.leases[name] = l
}
