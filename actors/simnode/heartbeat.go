package simnode

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// beat is one node's heartbeat: register it (the first time), post its status when due, renew
// its lease. A frozen node stays silent.
func (f *fleet) beat(ctx context.Context, name string) {
	if f.isFrozen(name) {
		return
	}
	node, err := f.hb.Register(ctx, name, func() *corev1.Node { return f.newNode(name) })
	if err == nil && f.hb.StatusDue(node) {
		_, err = f.hb.PostStatus(ctx, node, f.setStatus)
	}
	if err != nil && ctx.Err() == nil {
		f.cfg.Logger.Debug("simnode node status", "node", name, "err", err)
	}
	if node == nil {
		return // never registered: no lease to own yet
	}
	if err := f.hb.RenewLease(ctx, name); err != nil && ctx.Err() == nil {
		f.cfg.Logger.Debug("simnode lease", "node", name, "err", err)
	}
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

func (f *fleet) setStatus(n *corev1.Node) {
	n.Status.Capacity = f.cfg.Capacity
	n.Status.Allocatable = f.cfg.Capacity
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: f.hostIP(n.Name)},
		{Type: corev1.NodeHostName, Address: n.Name},
	}
	n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.37.2-skiff-sim", OperatingSystem: "linux", Architecture: "amd64",
		ContainerRuntimeVersion: "simulated://0", MachineID: n.Name, SystemUUID: n.Name, BootID: n.Name}
}

// hostIP is the node's simulated InternalIP, also its pods' hostIP.
func (f *fleet) hostIP(node string) string {
	i := f.index[node]
	return fmt.Sprintf("10.250.%d.%d", i/250, i%250+1)
}
