package framework

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// VolumeBinding is kube-scheduler's plugin of that name.
const VolumeBinding = "VolumeBinding"

// Reasons of VolumeBinding, worded as kube-scheduler words them.
const (
	ReasonUnboundImmediate    = "pod has unbound immediate PersistentVolumeClaims"
	reasonVolumeNodeConflict  = "node(s) had volume node affinity conflict"
	reasonNoVolumeToBind      = "node(s) did not find available persistent volumes to bind"
	reasonSelectedNodeDiffers = "node(s) didn't match the node selected for the pod's volumes"
)

// PodVolumes is what a pod's persistentVolumeClaim volumes ask of a node, read from the
// claims and volumes by the scheduler (VolumeLister) once per cycle.
type PodVolumes struct {
	// Unschedulable rules out every node (a missing claim, an unbound Immediate one).
	Unschedulable string
	// Affinities of the bound volumes: the node must match each.
	Affinities []*v1.NodeSelector
	// Unbound are the claims that wait for their first consumer: the node must be able to
	// bind or provision each.
	Unbound []UnboundClaim
	// SelectedNode: a claim already waits for a volume on this node.
	SelectedNode string
}

// UnboundClaim is how a node can serve an unbound WaitForFirstConsumer claim.
type UnboundClaim struct {
	// Volumes are the node affinities of the available volumes that fit the claim (a nil
	// entry: a volume any node reaches).
	Volumes []*v1.NodeSelector
	// ProvisionAnnotation: the class's provisioner serves the nodes that carry this annotation
	// (local-path); Anywhere: it serves every node (one kube-scheduler assumes can).
	ProvisionAnnotation string
	Anywhere            bool
}

// servedBy reports whether the claim can get a volume on n.
func (c *UnboundClaim) servedBy(n *v1.Node) bool {
	if c.Anywhere || (c.ProvisionAnnotation != "" && n.Annotations[c.ProvisionAnnotation] != "") {
		return true
	}
	for _, sel := range c.Volumes {
		if sel == nil || selects(sel, n) {
			return true
		}
	}
	return false
}

func selects(sel *v1.NodeSelector, n *v1.Node) bool {
	ok, err := nodeaffinity.NewLazyErrorNodeSelector(sel).Match(n)
	return err == nil && ok
}

// VolumeLister reads a pod's volume constraints (see PodVolumes).
type VolumeLister func(pod *v1.Pod) PodVolumes

// volumeBinding filters nodes by the pod's claims: their bound volumes' node affinity, and
// for claims waiting for their first consumer, a node that can provision them.
type volumeBinding struct{}

func (volumeBinding) Name() string { return VolumeBinding }

// PreFilter reads the pod's volumes once; a pod without claims skips the plugin.
func (volumeBinding) PreFilter(cy *Cycle, _ *Snapshot) (bool, error) {
	if cy.volumes == nil || !hasClaims(cy.pod) {
		return true, nil
	}
	pv := cy.volumes(cy.pod)
	cy.vols = &pv
	return false, nil
}

func hasClaims(pod *v1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return true
		}
	}
	return false
}

func (volumeBinding) Filter(cy *Cycle, ni *NodeInfo, out []string) []string {
	pv := cy.vols
	switch {
	case pv.Unschedulable != "":
		return append(out, pv.Unschedulable)
	case pv.SelectedNode != "" && ni.node.Name != pv.SelectedNode:
		return append(out, reasonSelectedNodeDiffers)
	}
	for _, sel := range pv.Affinities {
		if !selects(sel, ni.node) {
			return append(out, reasonVolumeNodeConflict)
		}
	}
	for i := range pv.Unbound {
		if !pv.Unbound[i].servedBy(ni.node) {
			return append(out, reasonNoVolumeToBind)
		}
	}
	return out
}

// Events: a claim or volume created or changed (bound, provisioned), or a node added or
// relabelled (it may match a volume's affinity now).
func (volumeBinding) Events() []EventHint {
	return []EventHint{
		{Resource: ResourceVolume, Actions: Add | Update},
		{Resource: ResourceNode, Actions: Add | UpdateNodeLabel},
	}
}
