package simnode

import (
	"context"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// heartbeat registers the nodes, then renews every lease each RenewInterval and reports the
// node Ready again whenever something else (the node lifecycle controller) marked it otherwise.
func (f *fleet) heartbeat(ctx context.Context) {
	t := time.NewTicker(f.cfg.RenewInterval)
	defer t.Stop()
	for {
		for name := range f.index {
			if ctx.Err() != nil {
				return
			}
			if f.isFrozen(name) {
				continue
			}
			if err := f.beat(ctx, name); err != nil && ctx.Err() == nil {
				f.cfg.Logger.Debug("simnode heartbeat", "node", name, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (f *fleet) beat(ctx context.Context, name string) error {
	if err := f.ensureNode(ctx, name); err != nil {
		return err
	}
	return f.renewLease(ctx, name)
}

func (f *fleet) ensureNode(ctx context.Context, name string) error {
	o, ok := f.nodes.Get("", name)
	if !ok {
		created, err := f.client.Create(ctx, f.newNode(name))
		if apierrors.IsAlreadyExists(err) {
			return nil // the informer will catch up; the next beat sets its status
		}
		if err != nil {
			return err
		}
		o = created
	}
	node := o.(*corev1.Node)
	if nodeReady(node) {
		return nil
	}
	next := node.DeepCopy()
	now := metav1.Now()
	next.Status.Capacity = f.cfg.Capacity
	next.Status.Allocatable = f.cfg.Capacity
	next.Status.Conditions = nodeConditions(now)
	next.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.250.%d.%d", f.index[name]/250, f.index[name]%250+1)},
		{Type: corev1.NodeHostName, Address: name},
	}
	next.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.37.2-skiff-sim", OperatingSystem: "linux", Architecture: "amd64",
		ContainerRuntimeVersion: "simulated://0", MachineID: name, SystemUUID: name, BootID: name}
	_, err := f.client.UpdateStatus(ctx, next)
	return err
}

func (f *fleet) newNode(name string) *corev1.Node {
	labels := map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", LabelSimulated: "true",
	}
	for k, v := range f.cfg.Labels {
		labels[k] = v
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{LabelSimulated: "true"}}}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeConditions(now metav1.Time) []corev1.NodeCondition {
	c := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return []corev1.NodeCondition{
		c(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		c(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		c(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		c(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "simulated kubelet is posting ready status"),
	}
}

func (f *fleet) renewLease(ctx context.Context, name string) error {
	k := controllerkit.MustKind("coordination.k8s.io", "leases")
	now := metav1.NewMicroTime(time.Now())
	o, err := f.client.Get(ctx, k, LeaseNamespace, name)
	if apierrors.IsNotFound(err) {
		l := &coordv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: LeaseNamespace},
			Spec: coordv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(int32(f.cfg.LeaseDuration / time.Second)),
				AcquireTime: &now, RenewTime: &now},
		}
		if node, ok := f.nodes.Get("", name); ok {
			n := node.(*corev1.Node)
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
		}
		_, err = f.client.Create(ctx, l)
		return err
	}
	if err != nil {
		return err
	}
	l := o.(*coordv1.Lease).DeepCopy()
	l.Spec.RenewTime = &now
	_, err = f.client.Update(ctx, l)
	return err
}
