package kubelet

import (
	"context"
	goruntime "runtime"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// heartbeat registers the Node, then renews its Lease every RenewInterval and refreshes the
// node status whenever it is stale (NodeStatusInterval) or someone else marked it not Ready.
func (k *kubelet) heartbeat(ctx context.Context) {
	t := time.NewTicker(k.cfg.RenewInterval)
	defer t.Stop()
	starting := true
	for {
		if err := k.ensureNode(ctx); err != nil && ctx.Err() == nil {
			k.cfg.Logger.Warn("kubelet: node status", "node", k.cfg.NodeName, "err", err)
		} else if o, ok := k.nodes.Get("", k.cfg.NodeName); ok && starting {
			// Once per agent (re)start, on the Node (once the cache has it), as the kubelet does.
			starting = false
			k.recorder.Eventf(ctx, o, corev1.EventTypeNormal, "Starting", "Starting kubelet.")
		}
		if err := k.renewLease(ctx); err != nil && ctx.Err() == nil {
			k.cfg.Logger.Warn("kubelet: lease", "node", k.cfg.NodeName, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (k *kubelet) ensureNode(ctx context.Context) error {
	var node *corev1.Node
	if o, ok := k.nodes.Get("", k.cfg.NodeName); ok {
		node = o.(*corev1.Node)
	} else {
		created, err := k.client.Create(ctx, k.newNode())
		if apierrors.IsAlreadyExists(err) {
			o, err := k.client.Get(ctx, controllerkit.MustKind("", "nodes"), "", k.cfg.NodeName)
			if err != nil {
				return err
			}
			created = o
		} else if err != nil {
			return err
		}
		node = created.(*corev1.Node)
	}
	if k.cfg.PodCIDR != "" && node.Spec.PodCIDR == "" {
		next := node.DeepCopy()
		next.Spec.PodCIDR, next.Spec.PodCIDRs = k.cfg.PodCIDR, []string{k.cfg.PodCIDR}
		out, err := k.client.Update(ctx, next)
		if err != nil {
			return err
		}
		node = out.(*corev1.Node)
	}
	if !k.nodeStatusStale(node) {
		return nil
	}
	next := node.DeepCopy()
	k.setNodeStatus(next, metav1.Now())
	out, err := k.client.UpdateStatus(ctx, next)
	if err == nil && !nodeReady(node) {
		k.recorder.Eventf(ctx, out, corev1.EventTypeNormal, "NodeReady", "Node %s status is now: NodeReady", k.cfg.NodeName)
	}
	return err
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (k *kubelet) nodeStatusStale(n *corev1.Node) bool {
	if n.Status.NodeInfo.KubeletVersion != Version || len(n.Status.Addresses) == 0 {
		return true
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionTrue || time.Since(c.LastHeartbeatTime.Time) >= k.cfg.NodeStatusInterval
		}
	}
	return true
}

func (k *kubelet) newNode() *corev1.Node {
	labels := map[string]string{
		"kubernetes.io/hostname": k.cfg.NodeName, "kubernetes.io/os": goruntime.GOOS, "kubernetes.io/arch": goruntime.GOARCH,
	}
	for key, v := range k.cfg.Labels {
		labels[key] = v
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Labels: labels}}
	if k.cfg.PodCIDR != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = k.cfg.PodCIDR, []string{k.cfg.PodCIDR}
	}
	return n
}

func (k *kubelet) setNodeStatus(n *corev1.Node, now metav1.Time) {
	cpu, mem, pods := k.rt.NodeResources()
	capacity := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem, corev1.ResourcePods: pods}
	n.Status.Capacity, n.Status.Allocatable = capacity, capacity.DeepCopy()
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: k.cfg.NodeIP},
		{Type: corev1.NodeHostName, Address: k.cfg.NodeName},
	}
	n.Status.NodeInfo = corev1.NodeSystemInfo{
		KubeletVersion: Version, OperatingSystem: goruntime.GOOS, Architecture: goruntime.GOARCH,
		ContainerRuntimeVersion: "containerd://" + k.runtimeVersion(), MachineID: k.cfg.NodeName, SystemUUID: k.cfg.NodeName,
	}
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		c := corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
		for _, old := range n.Status.Conditions {
			if old.Type == t && old.Status == s {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		return c
	}
	n.Status.Conditions = []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
	}
}

func (k *kubelet) runtimeVersion() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := k.rt.Client().Version(ctx)
	if err != nil {
		return "unknown"
	}
	return v.Version
}

func (k *kubelet) renewLease(ctx context.Context) error {
	now := metav1.NewMicroTime(time.Now())
	o, err := k.client.Get(ctx, controllerkit.MustKind("coordination.k8s.io", "leases"), LeaseNamespace, k.cfg.NodeName)
	if apierrors.IsNotFound(err) {
		l := &coordv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Namespace: LeaseNamespace},
			Spec: coordv1.LeaseSpec{HolderIdentity: ptr.To(k.cfg.NodeName), LeaseDurationSeconds: ptr.To(int32(k.cfg.LeaseDuration / time.Second)),
				AcquireTime: &now, RenewTime: &now},
		}
		if n, ok := k.nodes.Get("", k.cfg.NodeName); ok {
			node := n.(*corev1.Node)
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
		_, err = k.client.Create(ctx, l)
		return err
	}
	if err != nil {
		return err
	}
	l := o.(*coordv1.Lease).DeepCopy()
	l.Spec.RenewTime = &now
	l.Spec.HolderIdentity = ptr.To(k.cfg.NodeName)
	_, err = k.client.Update(ctx, l)
	return err
}
