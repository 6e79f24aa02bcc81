package framework

import (
	v1 "k8s.io/api/core/v1"
)

// Reasons, worded as kube-scheduler words them.
const (
	reasonUnschedulable   = "node(s) were unschedulable"
	reasonNodeName        = "node(s) didn't match the requested node name"
	reasonNodeAffinity    = "node(s) didn't match Pod's node affinity/selector"
	reasonNodePorts       = "node(s) didn't have free ports for the requested pod ports"
	reasonTooManyPods     = "Too many pods"
	reasonSpread          = "node(s) didn't match pod topology spread constraints"
	reasonSpreadLabel     = "node(s) didn't match pod topology spread constraints (missing required label)"
	reasonAntiAffinity    = "node(s) didn't match pod anti-affinity rules"
	reasonExistingAntiAff = "node(s) didn't satisfy existing pods anti-affinity rules"
)

var unschedulableTaint = v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}

// The filters that read only the node object (and the pods on it for ports and resources).
type (
	nodeUnschedulable  struct{}
	nodeName           struct{}
	taintToleration    struct{} // also scores PreferNoSchedule taints
	nodeAffinityPlugin struct{} // also scores preferred node affinity
	nodePorts          struct{}
	nodeResourcesFit   struct{}
)

func (nodeUnschedulable) Name() string  { return NodeUnschedulable }
func (nodeName) Name() string           { return NodeName }
func (taintToleration) Name() string    { return TaintToleration }
func (nodeAffinityPlugin) Name() string { return NodeAffinity }
func (nodePorts) Name() string          { return NodePorts }
func (nodeResourcesFit) Name() string   { return NodeResourcesFit }

func (nodeUnschedulable) Filter(cy *Cycle, ni *NodeInfo, out []string) []string {
	if !mayScheduleOn(cy.pod, ni.unschedulable) {
		return append(out, reasonUnschedulable)
	}
	return out
}

func schedulable(pod *v1.Pod, n *v1.Node) bool { return mayScheduleOn(pod, n.Spec.Unschedulable) }

func mayScheduleOn(pod *v1.Pod, unschedulable bool) bool {
	return !unschedulable || tolerates(pod.Spec.Tolerations, &unschedulableTaint)
}

func (nodeName) Filter(cy *Cycle, ni *NodeInfo, out []string) []string {
	if !nameMatches(cy.pod, ni.node) {
		return append(out, reasonNodeName)
	}
	return out
}

// PreFilter: only a pod that names its node is checked.
func (nodeName) PreFilter(cy *Cycle, _ *Snapshot) (bool, error) {
	return cy.pod.Spec.NodeName == "", nil
}

func nameMatches(pod *v1.Pod, n *v1.Node) bool {
	return pod.Spec.NodeName == "" || pod.Spec.NodeName == n.Name
}

func (taintToleration) Filter(cy *Cycle, ni *NodeInfo, out []string) []string {
	if i := untoleratedTaint(ni.taints, cy.pod.Spec.Tolerations, hardEffect); i >= 0 {
		return append(out, ni.taintReason[i])
	}
	return out
}

func taintsTolerated(pod *v1.Pod, n *v1.Node) bool {
	return untoleratedTaint(n.Spec.Taints, pod.Spec.Tolerations, hardEffect) < 0
}

// PreFilter: only a pod with a nodeSelector or required node affinity is checked.
func (nodeAffinityPlugin) PreFilter(cy *Cycle, _ *Snapshot) (bool, error) {
	a := cy.pod.Spec.Affinity
	return len(cy.pod.Spec.NodeSelector) == 0 && (a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil), nil
}

// Filter: nodeSelector and required node affinity.
func (nodeAffinityPlugin) Filter(cy *Cycle, ni *NodeInfo, out []string) []string {
	if ok, err := cy.reqAff.Match(ni.node); !ok || err != nil {
		return append(out, reasonNodeAffinity)
	}
	return out
}

// PreFilter: only a pod with host ports is checked.
func (nodePorts) PreFilter(cy *Cycle, _ *Snapshot) (bool, error) { return len(cy.pi.ports) == 0, nil }

func (nodePorts) Filter(cy *Cycle, ni *NodeInfo, out []string) []string {
	if ni.portsConflict(cy.pi.ports) {
		return append(out, reasonNodePorts)
	}
	return out
}

func (nodeResourcesFit) Filter(cy *Cycle, ni *NodeInfo, out []string) []string {
	return cy.fits(ni, out)
}
