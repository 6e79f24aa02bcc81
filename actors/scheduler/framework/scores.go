package framework

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// score returns the weighted sum of the normalised (0..MaxNodeScore) plugin scores of each
// feasible node, in the order given, in mem (grown to twice the nodes when short). Each
// plugin scores all the nodes in one call, so the per-node work is the plugin's own, not a
// dispatch.
func (cy *Cycle) score(nodes []*NodeInfo, o *Options, mem []int64) []int64 {
	type active struct {
		p ScorePlugin
		w int64
	}
	var buf [8]active
	act := buf[:0]
	for _, p := range scorers {
		if w := o.weight(p.Name()); w != 0 && p.PreScore(cy) {
			act = append(act, active{p: p, w: w})
		}
	}
	n := len(nodes)
	mem = slices.Grow(mem[:0], 2*n)[:2*n]
	total, raw := mem[:n], mem[n:]
	clear(total) // each plugin writes every raw score
	for _, a := range act {
		a.p.Score(cy, nodes, raw)
		if norm := a.p.Normalize(); norm != Raw {
			normalise(raw, norm == ByMaxReverse)
		}
		for i := range raw {
			total[i] += a.w * raw[i]
		}
	}
	return total
}

// The score plugins that are not also filters.
type (
	leastAllocated     struct{}
	balancedAllocation struct{}
	selectorSpread     struct{}
)

func (leastAllocated) Name() string                 { return NodeResourcesLeastAllocated }
func (leastAllocated) PreScore(*Cycle) bool         { return true }
func (leastAllocated) Normalize() Normalization     { return Raw }
func (balancedAllocation) Name() string             { return NodeResourcesBalancedAllocation }
func (balancedAllocation) PreScore(*Cycle) bool     { return true }
func (balancedAllocation) Normalize() Normalization { return Raw }
func (selectorSpread) Name() string                 { return SelectorSpread }
func (selectorSpread) PreScore(cy *Cycle) bool      { return cy.pi.owner != "" }
func (selectorSpread) Normalize() Normalization     { return ByMaxReverse }
func (taintToleration) PreScore(*Cycle) bool        { return true }
func (taintToleration) Normalize() Normalization    { return ByMaxReverse }
func (nodeAffinityPlugin) PreScore(cy *Cycle) bool  { return cy.prefAff != nil }
func (nodeAffinityPlugin) Normalize() Normalization { return ByMax }

func (leastAllocated) Score(cy *Cycle, nodes []*NodeInfo, raw []int64) {
	for i, ni := range nodes {
		raw[i] = cy.leastAllocated(ni)
	}
}

func (balancedAllocation) Score(cy *Cycle, nodes []*NodeInfo, raw []int64) {
	for i, ni := range nodes {
		raw[i] = cy.balancedAllocation(ni)
	}
}

// Score: fewer replicas of the pod's controller on the node is better. The owner is a
// number: a node's count is a scan of its few owners, no string hashed.
func (selectorSpread) Score(cy *Cycle, nodes []*NodeInfo, raw []int64) {
	if cy.owner == 0 { // no counted pod has this owner: none anywhere
		clear(raw)
		return
	}
	for i, ni := range nodes {
		raw[i] = int64(ni.ownerPods(cy.owner))
	}
}

func (taintToleration) Score(cy *Cycle, nodes []*NodeInfo, raw []int64) {
	for i, ni := range nodes {
		raw[i] = cy.preferNoScheduleTaints(ni)
	}
}

// Score: preferred node affinity, the sum of the weights of the matching terms.
func (nodeAffinityPlugin) Score(cy *Cycle, nodes []*NodeInfo, raw []int64) {
	for i, ni := range nodes {
		raw[i] = cy.prefAff.Score(ni.node)
	}
}

// normalise scales scores to 0..MaxNodeScore by the largest; reverse makes fewer better.
func normalise(s []int64, reverse bool) {
	var top int64
	for _, v := range s {
		top = max(top, v)
	}
	for i, v := range s {
		switch {
		case top == 0 && reverse:
			s[i] = MaxNodeScore
		case top == 0:
			s[i] = 0
		case reverse:
			s[i] = MaxNodeScore - v*MaxNodeScore/top
		default:
			s[i] = v * MaxNodeScore / top
		}
	}
}

// leastAllocated favours the node with the most cpu and memory left after the pod.
func (cy *Cycle) leastAllocated(ni *NodeInfo) int64 {
	free := func(alloc, used int64) int64 {
		if alloc <= 0 || used > alloc {
			return 0
		}
		return (alloc - used) * MaxNodeScore / alloc
	}
	cpu := free(ni.allocatable.MilliCPU, ni.nonZero.MilliCPU+cy.pi.nonZero.MilliCPU)
	mem := free(ni.allocatable.Memory, ni.nonZero.Memory+cy.pi.nonZero.Memory)
	return (cpu + mem) / 2
}

// balancedAllocation favours the node whose cpu and memory use would be most alike: one
// minus the standard deviation of the two fractions (for two values, half their distance).
func (cy *Cycle) balancedAllocation(ni *NodeInfo) int64 {
	frac := func(alloc, used int64) float64 {
		if alloc <= 0 {
			return 1
		}
		return min(float64(used)/float64(alloc), 1)
	}
	c := frac(ni.allocatable.MilliCPU, ni.nonZero.MilliCPU+cy.pi.nonZero.MilliCPU)
	m := frac(ni.allocatable.Memory, ni.nonZero.Memory+cy.pi.nonZero.Memory)
	d := c - m
	if d < 0 {
		d = -d
	}
	return int64((1 - d/2) * MaxNodeScore)
}

// preferNoScheduleTaints counts the PreferNoSchedule taints the pod does not tolerate. Only
// tolerations for that effect (or every effect) count, as in kube-scheduler.
func (cy *Cycle) preferNoScheduleTaints(ni *NodeInfo) int64 {
	var n int64
	for i := range ni.taints {
		t := &ni.taints[i]
		if t.Effect != v1.TaintEffectPreferNoSchedule {
			continue
		}
		ok := false
		for j := range cy.pod.Spec.Tolerations {
			tol := &cy.pod.Spec.Tolerations[j]
			if (tol.Effect == "" || tol.Effect == v1.TaintEffectPreferNoSchedule) && tol.ToleratesTaint(discard, t, true) {
				ok = true
				break
			}
		}
		if !ok {
			n++
		}
	}
	return n
}
