package framework

import v1 "k8s.io/api/core/v1"

// interPodAffinity enforces required pod anti-affinity, both the pod's own and that of the
// pods already placed.
type interPodAffinity struct{}

func (interPodAffinity) Name() string { return InterPodAffinity }

func (interPodAffinity) Filter(cy *Cycle, ni *NodeInfo, out []string) []string {
	for i := range cy.anti {
		t := &cy.anti[i]
		if t.key == hostnameKey {
			if t.m.any(ni) {
				return append(out, reasonAntiAffinity)
			}
		} else if v := topoValue(ni, t.key); v != "" && t.forbid[v] {
			return append(out, reasonAntiAffinity)
		}
	}
	for _, pi := range ni.anti {
		for j := range pi.anti {
			if t := &pi.anti[j]; t.topologyKey == hostnameKey && t.matches(cy.pod) {
				return append(out, reasonExistingAntiAff)
			}
		}
	}
	for key, forbid := range cy.existingForbid {
		if v := topoValue(ni, key); v != "" && forbid[v] {
			return append(out, reasonExistingAntiAff)
		}
	}
	return out
}

// PreFilter compiles the pod's required anti-affinity, and finds the domains that existing
// pods' wide anti-affinity closes to it.
func (interPodAffinity) PreFilter(cy *Cycle, s *Snapshot) (bool, error) {
	for i := range cy.pi.anti {
		t := &cy.pi.anti[i]
		at := antiTerm{key: t.topologyKey, m: termMatcher(s.intern, t)}
		if at.key != hostnameKey {
			at.forbid = map[string]bool{}
			for n := 0; n < s.n; n++ {
				ni := s.node(n)
				if v := topoValue(ni, at.key); v != "" && !at.forbid[v] && at.m.any(ni) {
					at.forbid[v] = true
				}
			}
		}
		cy.anti = append(cy.anti, at)
	}
	if !s.wideAnti {
		return len(cy.anti) == 0 && !s.anyAnti, nil // no terms on either side
	}
	for n := 0; n < s.n; n++ {
		ni := s.node(n)
		for _, pi := range ni.anti {
			for j := range pi.anti {
				t := &pi.anti[j]
				if t.topologyKey == hostnameKey || !t.matches(cy.pod) {
					continue
				}
				v := topoValue(ni, t.topologyKey)
				if v == "" {
					continue
				}
				if cy.existingForbid == nil {
					cy.existingForbid = map[string]map[string]bool{}
				}
				if cy.existingForbid[t.topologyKey] == nil {
					cy.existingForbid[t.topologyKey] = map[string]bool{}
				}
				cy.existingForbid[t.topologyKey][v] = true
			}
		}
	}
	return false, nil
}

func (interPodAffinity) Events() []EventHint {
	return []EventHint{
		{Resource: ResourceAssignedPod, Actions: Delete | UpdatePodLabel, Hint: antiPodHint},
		{Resource: ResourceNode, Actions: Add | UpdateNodeLabel}, // new domains, free of matching pods
	}
}

// antiPodHint: the pod that went (or its old labels) was what one side's anti-affinity kept
// apart: it matched the pod's terms, or its own terms matched the pod.
func antiPodHint(pod *v1.Pod, ev *ClusterEvent) QueueingHint {
	gone := ev.Pod
	if ev.OldPod != nil {
		gone = ev.OldPod
	}
	if keptApart(pod, gone) || keptApart(gone, pod) {
		return Queue
	}
	return QueueSkip
}

// keptApart reports whether a's required anti-affinity matches b.
func keptApart(a, b *v1.Pod) bool {
	if a.Spec.Affinity == nil || a.Spec.Affinity.PodAntiAffinity == nil {
		return false
	}
	for _, t := range compileTerms(a, a.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) {
		if t.matches(b) {
			return true
		}
	}
	return false
}
