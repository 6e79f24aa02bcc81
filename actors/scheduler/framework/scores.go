package framework

import (
	v1 "k8s.io/api/core/v1"
)

// score returns the weighted sum of the normalised (0..MaxNodeScore) plugin scores of each
// feasible node, in the order given. Raw scores are computed in one pass, touching each
// node once: at 5,000 nodes the cost is memory, not arithmetic.
func (cy *cycle) score(nodes []*NodeInfo, o *Options) []int64 {
	wLeast, wBal := o.weight(NodeResourcesLeastAllocated), o.weight(NodeResourcesBalancedAllocation)
	wSpread, wTaint, wAff := o.weight(SelectorSpread), o.weight(TaintToleration), o.weight(NodeAffinity)
	if cy.pi.owner == "" {
		wSpread = 0
	}
	if cy.prefAff == nil {
		wAff = 0
	}
	n := len(nodes)
	buf := make([]int64, 4*n)
	total, spread, taint, aff := buf[:n], buf[n:2*n], buf[2*n:3*n], buf[3*n:]
	for i, ni := range nodes {
		if wLeast != 0 {
			total[i] += wLeast * cy.leastAllocated(ni)
		}
		if wBal != 0 {
			total[i] += wBal * cy.balancedAllocation(ni)
		}
		if wSpread != 0 {
			spread[i] = int64(ni.owners[cy.pi.owner])
		}
		if wTaint != 0 && len(ni.node.Spec.Taints) > 0 {
			taint[i] = cy.preferNoScheduleTaints(ni)
		}
		if wAff != 0 {
			aff[i] = cy.prefAff.Score(ni.node)
		}
	}
	add := func(w int64, raw []int64, reverse bool) {
		if w == 0 {
			return
		}
		normalise(raw, reverse)
		for i := range raw {
			total[i] += w * raw[i]
		}
	}
	add(wSpread, spread, true)
	add(wTaint, taint, true)
	add(wAff, aff, false)
	return total
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
func (cy *cycle) leastAllocated(ni *NodeInfo) int64 {
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
func (cy *cycle) balancedAllocation(ni *NodeInfo) int64 {
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

// preferNoScheduleTaints counts the PreferNoSchedule taints the pod does not tolerate.
// Only tolerations for that effect (or every effect) count, as in kube-scheduler.
func (cy *cycle) preferNoScheduleTaints(ni *NodeInfo) int64 {
	var n int64
	for i := range ni.node.Spec.Taints {
		t := &ni.node.Spec.Taints[i]
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
