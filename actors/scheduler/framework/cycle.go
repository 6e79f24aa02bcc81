package framework

import (
	"fmt"
	"math"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

var discard = logr.Discard()

// cycle is everything derived from the pod (and, for spreading, from the whole snapshot)
// once per scheduling cycle, so the per-node work is lookups.
type cycle struct {
	pod     *v1.Pod
	pi      *podInfo
	reqAff  nodeaffinity.RequiredNodeAffinity
	prefAff *nodeaffinity.PreferredSchedulingTerms
	spread  []spreadConstraint
	anti    []antiTerm
	// existing pods' anti-affinity beyond their node: topology key → domains the pod
	// may not join.
	existingForbid map[string]map[string]bool
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

func newCycle(s *Snapshot, pod *v1.Pod) (*cycle, error) {
	cy := &cycle{pod: pod, pi: newPodInfo(pod), reqAff: nodeaffinity.GetRequiredNodeAffinity(pod)}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		p, err := nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		if err != nil {
			return nil, fmt.Errorf("preferred node affinity: %w", err)
		}
		cy.prefAff = p
	}
	if err := cy.prepareSpread(s); err != nil {
		return nil, err
	}
	cy.prepareAnti(s)
	return cy, nil
}

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

// filter appends why the pod cannot go to ni; nothing appended means it fits. Like
// kube-scheduler it stops at the first plugin that rejects the node.
func (cy *cycle) filter(ni *NodeInfo, out []string) []string {
	node := ni.node
	// NodeUnschedulable
	if node.Spec.Unschedulable && !tolerates(cy.pod.Spec.Tolerations, &unschedulableTaint) {
		return append(out, reasonUnschedulable)
	}
	// NodeName
	if cy.pod.Spec.NodeName != "" && cy.pod.Spec.NodeName != node.Name {
		return append(out, reasonNodeName)
	}
	// TaintToleration
	if i := untoleratedTaint(node.Spec.Taints, cy.pod.Spec.Tolerations, hardEffect); i >= 0 {
		return append(out, ni.taintReason[i])
	}
	// NodeAffinity (nodeSelector and required node affinity)
	if ok, err := cy.reqAff.Match(node); !ok || err != nil {
		return append(out, reasonNodeAffinity)
	}
	// NodePorts
	if len(cy.pi.ports) > 0 && ni.portsConflict(cy.pi.ports) {
		return append(out, reasonNodePorts)
	}
	// NodeResourcesFit
	if out = cy.fits(ni, out); len(out) > 0 {
		return out
	}
	// PodTopologySpread
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
	// InterPodAffinity (required anti-affinity, both directions)
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

func (cy *cycle) fits(ni *NodeInfo, out []string) []string {
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

// prepareSpread counts, for each DoNotSchedule constraint, the matching pods per domain
// over the nodes the constraint considers, and the smallest domain.
func (cy *cycle) prepareSpread(s *Snapshot) error {
	pod := cy.pod
	var cons []v1.TopologySpreadConstraint
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == v1.DoNotSchedule {
			cons = append(cons, c)
		}
	}
	if len(cons) == 0 {
		return nil
	}
	honorAff := make([]bool, len(cons))
	honorTaints := make([]bool, len(cons))
	minDomains := make([]int, len(cons))
	cy.spread = make([]spreadConstraint, len(cons))
	for i, c := range cons {
		sel, err := spreadSelector(pod, &c)
		if err != nil {
			return fmt.Errorf("topology spread constraint %d: %w", i, err)
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
				if untoleratedTaint(ni.node.Spec.Taints, pod.Spec.Tolerations, hardEffect) >= 0 {
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
	return nil
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

// prepareAnti compiles the pod's required anti-affinity, and finds the domains that
// existing pods' wide anti-affinity closes to it.
func (cy *cycle) prepareAnti(s *Snapshot) {
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
		return
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
}

func allZero(cs []spreadConstraint) bool {
	for i := range cs {
		if cs[i].min != 0 {
			return false
		}
	}
	return true
}
