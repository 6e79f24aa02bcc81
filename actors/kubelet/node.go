package kubelet

import (
	"cmp"
	"context"
	goruntime "runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/actors/nodeheartbeat"
	"github.com/skiff-sh/skiff/schemas/defaults"
)

// heartbeat registers the Node, then renews its Lease every RenewInterval and posts the node
// status whenever it is stale (NodeStatusInterval), outdated, or someone else marked it not
// Ready: the heartbeat the simulated nodes share (nodeheartbeat).
func (k *kubelet) heartbeat(ctx context.Context) {
	hb := &nodeheartbeat.Heartbeat{Client: k.client, Nodes: informer.Of[*corev1.Node](k.nodes), LeaseDuration: k.cfg.LeaseDuration,
		StatusInterval: k.cfg.NodeStatusInterval, ReadyMessage: "kubelet is posting ready status"}
	t := time.NewTicker(k.cfg.RenewInterval)
	defer t.Stop()
	starting := true
	for {
		if err := k.ensureNode(ctx, hb); err != nil && ctx.Err() == nil {
			k.cfg.Logger.Warn("kubelet: node status", "node", k.cfg.NodeName, "err", err)
		} else if o, ok := k.nodes.Get("", k.cfg.NodeName); ok && starting {
			// Once per agent (re)start, on the Node (once the cache has it), as the kubelet does.
			starting = false
			k.recorder.Eventf(ctx, o, corev1.EventTypeNormal, "Starting", "Starting kubelet.")
		}
		if err := hb.RenewLease(ctx, k.cfg.NodeName); err != nil && ctx.Err() == nil {
			k.cfg.Logger.Warn("kubelet: lease", "node", k.cfg.NodeName, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (k *kubelet) ensureNode(ctx context.Context, hb *nodeheartbeat.Heartbeat) error {
	node, err := hb.Register(ctx, k.cfg.NodeName, k.newNode)
	if err != nil {
		return err
	}
	missingCIDR := k.cfg.PodCIDR != "" && node.Spec.PodCIDR == ""
	if missingCIDR || node.Annotations[defaults.LocalPathDirAnnotation] != k.cfg.LocalPathDir {
		next := node.DeepCopy()
		if missingCIDR {
			next.Spec.PodCIDR, next.Spec.PodCIDRs = k.cfg.PodCIDR, []string{k.cfg.PodCIDR}
		}
		setLocalPathDir(&next.ObjectMeta, k.cfg.LocalPathDir)
		out, err := k.client.Update(ctx, next)
		if err != nil {
			return err
		}
		node = out.(*corev1.Node)
	}
	// An agent of another version, or one that never posted addresses, rewrites the status now.
	outdated := node.Status.NodeInfo.KubeletVersion != Version || len(node.Status.Addresses) == 0 || node.Status.NodeInfo.OSImage == ""
	if !outdated && !hb.StatusDue(node) {
		return nil
	}
	out, err := hb.PostStatus(ctx, node, k.setNodeStatus)
	if err == nil && !nodeheartbeat.Ready(node) {
		k.recorder.Eventf(ctx, out, corev1.EventTypeNormal, "NodeReady", "Node %s status is now: NodeReady", k.cfg.NodeName)
	}
	return err
}

func (k *kubelet) newNode() *corev1.Node {
	labels := map[string]string{
		"kubernetes.io/hostname": k.cfg.NodeName, "kubernetes.io/os": goruntime.GOOS, "kubernetes.io/arch": goruntime.GOARCH,
	}
	for key, v := range k.cfg.Labels {
		labels[key] = v
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Labels: labels}}
	setLocalPathDir(&n.ObjectMeta, k.cfg.LocalPathDir)
	if k.cfg.PodCIDR != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = k.cfg.PodCIDR, []string{k.cfg.PodCIDR}
	}
	return n
}

// setLocalPathDir publishes where the node keeps local-path volumes, for the provisioner (the
// PersistentVolume controller) and the scheduler.
func setLocalPathDir(m *metav1.ObjectMeta, dir string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[defaults.LocalPathDirAnnotation] = dir
}

// setNodeStatus fills what the heartbeat does not: capacity, addresses, node info.
func (k *kubelet) setNodeStatus(n *corev1.Node) {
	cpu, mem, pods := k.rt.NodeResources()
	capacity := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem, corev1.ResourcePods: pods}
	n.Status.Capacity, n.Status.Allocatable = capacity, capacity.DeepCopy()
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: k.cfg.NodeIP},
		{Type: corev1.NodeHostName, Address: k.cfg.NodeName},
	}
	host := readHostInfo()
	n.Status.NodeInfo = corev1.NodeSystemInfo{
		KubeletVersion: Version, OperatingSystem: goruntime.GOOS, Architecture: goruntime.GOARCH,
		ContainerRuntimeVersion: "containerd://" + k.runtimeVersion(), MachineID: cmp.Or(host.machineID, k.cfg.NodeName),
		SystemUUID: k.cfg.NodeName, BootID: host.bootID, OSImage: host.osImage, KernelVersion: host.kernelVersion,
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
