package framework

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Every filter registers the events that can undo its rejections. Hints read only the pod and
// the event's objects, as kube-scheduler's do: they may say Queue for a pod that still does
// not fit (it fails again and waits again), never Skip for one that would.
var (
	_ FilterPlugin = nodeUnschedulable{}
	_ FilterPlugin = nodeName{}
	_ FilterPlugin = taintToleration{}
	_ FilterPlugin = nodeAffinityPlugin{}
	_ FilterPlugin = nodePorts{}
	_ FilterPlugin = nodeResourcesFit{}
	_ FilterPlugin = volumeBinding{}
	_ FilterPlugin = podTopologySpread{}
	_ FilterPlugin = interPodAffinity{}
	_ ScorePlugin  = taintToleration{}
	_ ScorePlugin  = nodeAffinityPlugin{}
)

// nodeHint queues a pod when the event's node passes ok for it and (on an update) the old
// version did not: the filter that rejected the pod reads nothing else of the node.
func nodeHint(ok func(pod *v1.Pod, n *v1.Node) bool) QueueingHintFn {
	return func(pod *v1.Pod, ev *ClusterEvent) QueueingHint {
		if ok(pod, ev.Node) && (ev.OldNode == nil || !ok(pod, ev.OldNode)) {
			return Queue
		}
		return QueueSkip
	}
}

func (nodeUnschedulable) Events() []EventHint {
	return []EventHint{{Resource: ResourceNode, Actions: Add | UpdateNodeTaint, Hint: nodeHint(schedulable)}}
}

func (nodeName) Events() []EventHint {
	return []EventHint{{Resource: ResourceNode, Actions: Add, Hint: nodeHint(nameMatches)}}
}

func (taintToleration) Events() []EventHint {
	return []EventHint{{Resource: ResourceNode, Actions: Add | UpdateNodeTaint, Hint: nodeHint(taintsTolerated)}}
}

func (nodeAffinityPlugin) Events() []EventHint {
	return []EventHint{{Resource: ResourceNode, Actions: Add | UpdateNodeLabel, Hint: nodeHint(affinityMatches)}}
}

func affinityMatches(pod *v1.Pod, n *v1.Node) bool {
	ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(n)
	return ok && err == nil
}

func (nodePorts) Events() []EventHint {
	return []EventHint{
		{Resource: ResourceNode, Actions: Add}, // a new node has every port free
		{Resource: ResourceAssignedPod, Actions: Delete, Hint: freesPorts},
	}
}

// freesPorts: the pod that went held a host port the pod wants.
func freesPorts(pod *v1.Pod, ev *ClusterEvent) QueueingHint {
	gone := newNodeInfo(0)
	gone.countPod(&podInfo{ports: podHostPorts(ev.Pod)}, 1)
	if gone.portsConflict(podHostPorts(pod)) {
		return Queue
	}
	return QueueSkip
}

func (nodeResourcesFit) Events() []EventHint {
	return []EventHint{
		{Resource: ResourceNode, Actions: Add | UpdateNodeAllocatable, Hint: roomOnNode},
		// Every pod holds one of its node's pod slots, so any that goes may make room.
		{Resource: ResourceAssignedPod, Actions: Delete},
	}
}

// roomOnNode: the pod fits what the node offers when empty (the pods on it are not in the
// event) and, on an update, the node offers more of something than it did.
func roomOnNode(pod *v1.Pod, ev *ClusterEvent) QueueingHint {
	ni := newNodeInfo(0)
	ni.setNode(ev.Node)
	req, _ := podRequests(pod)
	if len((&Cycle{pod: pod, pi: &podInfo{req: req}}).fits(ni, nil)) > 0 {
		return QueueSkip
	}
	if ev.OldNode != nil {
		old := newNodeInfo(0)
		old.setNode(ev.OldNode)
		morePods := old.maxPods >= 0 && (ni.maxPods < 0 || ni.maxPods > old.maxPods)
		if !morePods && !grew(&old.allocatable, &ni.allocatable) {
			return QueueSkip
		}
	}
	return Queue
}

// grew reports whether b has more than a of any resource.
func grew(a, b *Resource) bool {
	if b.MilliCPU > a.MilliCPU || b.Memory > a.Memory || b.EphemeralStorage > a.EphemeralStorage {
		return true
	}
	for k, v := range b.Scalar {
		if v > a.Scalar[k] {
			return true
		}
	}
	return false
}
