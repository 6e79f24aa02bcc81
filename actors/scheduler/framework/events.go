package framework

import (
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/skiff-sh/skiff/schemas/defaults"
)

// EventResource is the kind of object a cluster event is about.
type EventResource uint8

const (
	ResourceNode        EventResource = iota + 1
	ResourceAssignedPod               // a pod bound to a node
	ResourceVolume                    // a PersistentVolumeClaim or PersistentVolume
	numResources
)

// ActionType is what happened to the object; an update carries the parts that changed.
type ActionType uint16

const (
	Add ActionType = 1 << iota
	Delete
	UpdateNodeAllocatable
	UpdateNodeLabel
	UpdateNodeTaint // taints or spec.unschedulable
	UpdatePodLabel
	Update // any other update (claims and volumes)

	UpdateNode = UpdateNodeAllocatable | UpdateNodeLabel | UpdateNodeTaint
)

// ClusterEvent is a change that may make an unschedulable pod fit.
type ClusterEvent struct {
	Resource      EventResource
	Action        ActionType
	OldNode, Node *v1.Node // node events; OldNode on updates
	OldPod, Pod   *v1.Pod  // assigned-pod events; OldPod on updates
}

// Label names the event in metrics and logs, as kube-scheduler's queue metrics do.
func (e *ClusterEvent) Label() string {
	res := "Node"
	switch e.Resource {
	case ResourceAssignedPod:
		res = "AssignedPod"
	case ResourceVolume:
		res = "Volume"
	}
	switch {
	case e.Action&Add != 0:
		return res + "Add"
	case e.Action&Delete != 0:
		return res + "Delete"
	}
	return res + "Update"
}

// QueueingHint is a plugin's verdict on whether an event may make a pod it rejected fit.
type QueueingHint uint8

const (
	QueueSkip QueueingHint = iota // the event cannot help the pod
	Queue                         // it may: try the pod again
)

// QueueingHintFn tells whether ev may make pod, which the plugin rejected, fit.
type QueueingHintFn func(pod *v1.Pod, ev *ClusterEvent) QueueingHint

// EventHint registers a plugin for events on Resource with any of Actions. A nil Hint queues
// the pod on every such event.
type EventHint struct {
	Resource EventResource
	Actions  ActionType
	Hint     QueueingHintFn
}

// NodeChange is what changed between two versions of a node that any plugin reads: zero for
// a heartbeat (conditions, images, addresses), which can make no pod fit and which the
// scheduler's cache may skip. A plugin that reads more of the node must add it here.
func NodeChange(old, n *v1.Node) ActionType {
	var a ActionType
	if !maps.EqualFunc(old.Status.Allocatable, n.Status.Allocatable, func(x, y resource.Quantity) bool { return x.Cmp(y) == 0 }) {
		a |= UpdateNodeAllocatable
	}
	// The one annotation VolumeBinding reads (where the node offers local-path volumes) counts
	// as a label; other annotations wake no rejected pod.
	if !maps.Equal(old.Labels, n.Labels) || old.Annotations[defaults.LocalPathDirAnnotation] != n.Annotations[defaults.LocalPathDirAnnotation] {
		a |= UpdateNodeLabel
	}
	if old.Spec.Unschedulable != n.Spec.Unschedulable || !slices.EqualFunc(old.Spec.Taints, n.Spec.Taints, sameTaint) {
		a |= UpdateNodeTaint
	}
	return a
}

func sameTaint(a, b v1.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect
}

// AssignedPodEvents are the events a change of a pod means for the pods waiting for room:
// a pod bound (or seen bound) is an add, one that ended or went away a delete, a pod moved
// between nodes both, and a label change on a bound pod an update. old or p is nil for an
// add or a delete of the object; unbound versions count as absent.
func AssignedPodEvents(old, p *v1.Pod) []ClusterEvent {
	counted := func(p *v1.Pod) bool { return p != nil && p.Spec.NodeName != "" && !terminal(p) }
	was, is := counted(old), counted(p)
	ev := func(a ActionType, o, n *v1.Pod) ClusterEvent {
		return ClusterEvent{Resource: ResourceAssignedPod, Action: a, OldPod: o, Pod: n}
	}
	switch {
	case was && is && old.Spec.NodeName != p.Spec.NodeName:
		return []ClusterEvent{ev(Delete, nil, old), ev(Add, nil, p)}
	case was && is && !maps.Equal(old.Labels, p.Labels):
		return []ClusterEvent{ev(UpdatePodLabel, old, p)}
	case was && !is:
		return []ClusterEvent{ev(Delete, nil, old)}
	case !was && is:
		return []ClusterEvent{ev(Add, nil, p)}
	}
	return nil
}

// registered holds each filter's Events; interest[r], per filter, the actions on resource r
// it registered for.
var registered, interest = func() (regs [][]EventHint, m [numResources][]ActionType) {
	for r := range m {
		m[r] = make([]ActionType, len(filters))
	}
	for i, f := range filters {
		regs = append(regs, f.Events())
		for _, h := range regs[i] {
			m[h.Resource][i] |= h.Actions
		}
	}
	return regs, m
}()

// Interested is the set of filters registered for ev: only pods one of them rejected can be
// helped by it.
func Interested(ev *ClusterEvent) PluginSet {
	var s PluginSet
	for i, a := range interest[ev.Resource] {
		if a&ev.Action != 0 {
			s = s.add(i)
		}
	}
	return s
}

// WorthRequeuing runs the hints of the plugins in rejected for ev: true when one says the
// pod may now fit. A pod no plugin rejected (there were no nodes) is worth a try on any event.
func (rejected PluginSet) WorthRequeuing(pod *v1.Pod, ev *ClusterEvent) bool {
	if rejected == 0 {
		return true
	}
	queue := false
	(rejected & Interested(ev)).Each(func(i int) {
		if queue {
			return
		}
		for _, h := range registered[i] {
			if h.Resource == ev.Resource && h.Actions&ev.Action != 0 && (h.Hint == nil || h.Hint(pod, ev) == Queue) {
				queue = true
				return
			}
		}
	})
	return queue
}
