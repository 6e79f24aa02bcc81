package framework

import (
	"fmt"
	"math"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// podTopologySpread enforces DoNotSchedule topology spread constraints.
type podTopologySpread struct{}

func (podTopologySpread) Name() string { return PodTopologySpread }

func (podTopologySpread) Filter(cy *Cycle, ni *NodeInfo, out []string) []string {
	for i := range cy.spread {
		c := &cy.spread[i]
		v := topoValue(ni, c.key)
		if v == "" {
			return append(out, reasonSpreadLabel)
		}
		var n int
		if c.key == hostnameKey {
			n = c.m.count(ni)
		} else {
			n = c.counts[v]
		}
		if n+c.self-c.min > c.maxSkew {
			return append(out, reasonSpread)
		}
	}
	return out
}

// PreFilter counts, for each DoNotSchedule constraint, the matching pods per domain over the
// nodes the constraint considers, and the smallest domain.
func (podTopologySpread) PreFilter(cy *Cycle, s *Snapshot) (bool, error) {
	pod := cy.pod
	var cons []v1.TopologySpreadConstraint
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == v1.DoNotSchedule {
			cons = append(cons, c)
		}
	}
	if len(cons) == 0 {
		return true, nil
	}
	honorAff := make([]bool, len(cons))
	honorTaints := make([]bool, len(cons))
	minDomains := make([]int, len(cons))
	cy.spread = make([]spreadConstraint, len(cons))
	for i, c := range cons {
		sel, err := spreadSelector(pod, &c)
		if err != nil {
			return false, fmt.Errorf("topology spread constraint %d: %w", i, err)
		}
		ns := pod.Namespace
		sc := spreadConstraint{key: c.TopologyKey, maxSkew: int(c.MaxSkew), min: math.MaxInt32,
			m: newPodMatcher(s.intern, sel, ns, func(p *v1.Pod) bool {
				return p.Namespace == ns && sel.Matches(labels.Set(p.Labels))
			})}
		if sel.Matches(labels.Set(pod.Labels)) {
			sc.self = 1
		}
		if sc.key != hostnameKey {
			sc.counts = map[string]int{}
		}
		cy.spread[i] = sc
		honorAff[i] = c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == v1.NodeInclusionPolicyHonor
		honorTaints[i] = c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == v1.NodeInclusionPolicyHonor
		if c.MinDomains != nil {
			minDomains[i] = int(*c.MinDomains)
		}
	}
	// With only per-host constraints and no minDomains, the pass can stop at the first
	// host where every constraint's count is zero: the minimum cannot go lower.
	hostOnly := true
	for i := range cy.spread {
		hostOnly = hostOnly && cy.spread[i].key == hostnameKey && minDomains[i] == 0
	}
	hostDomains := make([]int, len(cons))
nodes:
	for n := 0; n < s.n; n++ {
		ni := s.node(n)
		for i := range cy.spread {
			if topoValue(ni, cy.spread[i].key) == "" {
				continue nodes // a node must carry every constraint's key to count
			}
		}
		affOK, affChecked := false, false
		for i := range cy.spread {
			c := &cy.spread[i]
			if honorAff[i] {
				if !affChecked {
					ok, err := cy.reqAff.Match(ni.node)
					affOK, affChecked = ok && err == nil, true
				}
				if !affOK {
					continue
				}
			}
			if honorTaints[i] {
				if untoleratedTaint(ni.taints, pod.Spec.Tolerations, hardEffect) >= 0 {
					continue
				}
			}
			n := c.m.count(ni)
			if c.key == hostnameKey {
				c.min = min(c.min, n)
				hostDomains[i]++
			} else {
				c.counts[topoValue(ni, c.key)] += n
			}
		}
		if hostOnly && allZero(cy.spread) {
			break
		}
	}
	for i := range cy.spread {
		c := &cy.spread[i]
		domains := hostDomains[i]
		if c.key != hostnameKey {
			domains = len(c.counts)
			for _, n := range c.counts {
				c.min = min(c.min, n)
			}
		}
		if domains < minDomains[i] {
			c.min = 0 // too few domains: the empty ones that should exist count as zero
		}
	}
	return false, nil
}

// spreadSelector is the constraint's selector plus, for matchLabelKeys, the pod's own
// values of those keys.
func spreadSelector(pod *v1.Pod, c *v1.TopologySpreadConstraint) (labels.Selector, error) {
	if c.LabelSelector == nil {
		return labels.Nothing(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
	if err != nil {
		return nil, err
	}
	for _, k := range c.MatchLabelKeys {
		v, ok := pod.Labels[k]
		if !ok {
			continue
		}
		r, err := labels.NewRequirement(k, selection.Equals, []string{v})
		if err != nil {
			return nil, err
		}
		sel = sel.Add(*r)
	}
	return sel, nil
}

func allZero(cs []spreadConstraint) bool {
	for i := range cs {
		if cs[i].min != 0 {
			return false
		}
	}
	return true
}

func (podTopologySpread) Events() []EventHint {
	return []EventHint{
		{Resource: ResourceAssignedPod, Actions: Add | Delete | UpdatePodLabel, Hint: spreadPodHint},
		{Resource: ResourceNode, Actions: Add | Delete | UpdateNodeLabel | UpdateNodeTaint, Hint: spreadNodeHint},
	}
}

func hardConstraints(pod *v1.Pod) []v1.TopologySpreadConstraint {
	var out []v1.TopologySpreadConstraint
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == v1.DoNotSchedule {
			out = append(out, c)
		}
	}
	return out
}

// spreadPodHint: a pod the constraints count came, went or changed its labels, which moves
// the domain counts.
func spreadPodHint(pod *v1.Pod, ev *ClusterEvent) QueueingHint {
	for _, c := range hardConstraints(pod) {
		sel, err := spreadSelector(pod, &c)
		if err != nil {
			continue
		}
		for _, p := range []*v1.Pod{ev.OldPod, ev.Pod} {
			if p != nil && p.Namespace == pod.Namespace && sel.Matches(labels.Set(p.Labels)) {
				return Queue
			}
		}
	}
	return QueueSkip
}

// spreadNodeHint: a node that carries every constraint's key came or went (a domain, or a
// smaller minimum), or an update moved a node between domains or in or out of those counted.
func spreadNodeHint(pod *v1.Pod, ev *ClusterEvent) QueueingHint {
	cons := hardConstraints(pod)
	inDomains := func(n *v1.Node) bool {
		for _, c := range cons {
			if nodeTopoValue(n, c.TopologyKey) == "" {
				return false
			}
		}
		return true
	}
	if ev.OldNode == nil {
		if inDomains(ev.Node) {
			return Queue
		}
		return QueueSkip
	}
	if !inDomains(ev.Node) && !inDomains(ev.OldNode) {
		return QueueSkip
	}
	for _, c := range cons {
		if nodeTopoValue(ev.OldNode, c.TopologyKey) != nodeTopoValue(ev.Node, c.TopologyKey) {
			return Queue
		}
		if ev.Action&UpdateNodeTaint != 0 && c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == v1.NodeInclusionPolicyHonor {
			return Queue
		}
	}
	if ev.Action&UpdateNodeLabel != 0 && affinityMatches(pod, ev.OldNode) != affinityMatches(pod, ev.Node) {
		return Queue
	}
	return QueueSkip
}

// nodeTopoValue is topoValue read from a node object.
func nodeTopoValue(n *v1.Node, key string) string {
	if v := n.Labels[key]; v != "" || key != hostnameKey {
		return v
	}
	return n.Name
}
