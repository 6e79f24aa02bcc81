package framework

import (
	"fmt"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

var discard = logr.Discard()

// Cycle is everything derived from the pod (and, for spreading, from the whole snapshot)
// once per scheduling cycle, so the per-node work of the plugins is lookups.
type Cycle struct {
	pod     *v1.Pod
	pi      *podInfo
	owner   uint32 // the pod's interned controller owner; 0: none, or no counted pod has it
	reqAff  nodeaffinity.RequiredNodeAffinity
	prefAff *nodeaffinity.PreferredSchedulingTerms
	spread  []spreadConstraint
	anti    []antiTerm
	// existing pods' anti-affinity beyond their node: topology key → domains the pod
	// may not join.
	existingForbid map[string]map[string]bool
	volumes        VolumeLister
	vols           *PodVolumes // the pod's claims' constraints (VolumeBinding's PreFilter)
	// The filters to run (indexes into filters), without those a PreFilter skipped.
	active    []int8
	activeBuf [32]int8
}

type antiTerm struct {
	key    string
	m      podMatcher
	forbid map[string]bool // domains holding a matching pod (keys other than hostname)
}

type spreadConstraint struct {
	key     string
	maxSkew int
	self    int // 1 when the pod counts towards its own constraint
	m       podMatcher
	counts  map[string]int // matching pods per domain (keys other than hostname)
	min     int
}

func newCycle(s *Snapshot, pod *v1.Pod, volumes VolumeLister) (*Cycle, error) {
	cy := &Cycle{pod: pod, pi: newPodInfo(pod), reqAff: nodeaffinity.GetRequiredNodeAffinity(pod), volumes: volumes}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		p, err := nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		if err != nil {
			return nil, fmt.Errorf("preferred node affinity: %w", err)
		}
		cy.prefAff = p
	}
	if cy.pi.owner != "" {
		cy.owner, _ = s.intern.lookupOwner(cy.pi.owner)
	}
	cy.active = cy.activeBuf[:0]
	for i, f := range filters {
		if pf, ok := f.(PreFilter); ok {
			skip, err := pf.PreFilter(cy, s)
			if err != nil {
				return nil, err
			}
			if skip {
				continue
			}
		}
		cy.active = append(cy.active, int8(i))
	}
	return cy, nil
}

// filter appends why the pod cannot go to ni and returns the index of the filter that said
// so (-1: it fits). Like kube-scheduler it stops at the first filter that rejects the node.
func (cy *Cycle) filter(ni *NodeInfo, out []string) ([]string, int) {
	for _, i := range cy.active {
		if out = filters[i].Filter(cy, ni, out); len(out) > 0 {
			return out, int(i)
		}
	}
	return out, -1
}

func (cy *Cycle) fits(ni *NodeInfo, out []string) []string {
	if ni.maxPods >= 0 && int64(len(ni.pods))+1 > ni.maxPods {
		out = append(out, reasonTooManyPods)
	}
	r, alloc, used := &cy.pi.req, &ni.allocatable, &ni.requested
	if r.MilliCPU > 0 && r.MilliCPU > alloc.MilliCPU-used.MilliCPU {
		out = append(out, "Insufficient cpu")
	}
	if r.Memory > 0 && r.Memory > alloc.Memory-used.Memory {
		out = append(out, "Insufficient memory")
	}
	if r.EphemeralStorage > 0 && r.EphemeralStorage > alloc.EphemeralStorage-used.EphemeralStorage {
		out = append(out, "Insufficient ephemeral-storage")
	}
	for name, q := range r.Scalar {
		if q > 0 && q > alloc.Scalar[name]-used.Scalar[name] {
			out = append(out, "Insufficient "+string(name))
		}
	}
	return out
}

func hardEffect(t *v1.Taint) bool {
	return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
}

// untoleratedTaint returns the index of the first included taint not tolerated, or -1.
func untoleratedTaint(taints []v1.Taint, tols []v1.Toleration, include func(*v1.Taint) bool) int {
	for i := range taints {
		if include(&taints[i]) && !tolerates(tols, &taints[i]) {
			return i
		}
	}
	return -1
}

func tolerates(tols []v1.Toleration, t *v1.Taint) bool {
	for i := range tols {
		if tols[i].ToleratesTaint(discard, t, true) {
			return true
		}
	}
	return false
}
