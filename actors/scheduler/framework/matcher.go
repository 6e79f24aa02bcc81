package framework

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// podMatcher counts the pods on a node that a selector picks in a set of namespaces. When
// the selector pins one label in one namespace it reads the node's label index instead of
// walking the pods, which keeps spread and anti-affinity checks cheap on large clusters.
type podMatcher struct {
	sel   labels.Selector
	match func(p *v1.Pod) bool // namespace and selector
	ns    string               // the one namespace, or "" when several
	exact bool                 // sel is exactly pin: the index count is the answer
	pin   uint32               // interned required key=value; 0: none was ever counted
	pins  bool                 // some key=value is required: a zero index count means no match
}

func newPodMatcher(in *interner, sel labels.Selector, ns string, match func(*v1.Pod) bool) podMatcher {
	m := podMatcher{sel: sel, match: match, ns: ns}
	if ns == "" {
		return m
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		return m
	}
	for _, r := range reqs {
		op := r.Operator()
		if (op == selection.Equals || op == selection.DoubleEquals || op == selection.In) && r.Values().Len() == 1 {
			m.pin, _ = in.lookup(labelKey{ns, r.Key(), r.Values().UnsortedList()[0]})
			m.pins = true
			m.exact = len(reqs) == 1
			break
		}
	}
	return m
}

func (m *podMatcher) count(ni *NodeInfo) int {
	if m.pins {
		c := int(ni.labels[m.pin])
		if m.exact || c == 0 {
			return c
		}
	}
	n := 0
	for _, pi := range ni.pods {
		if m.match(pi.pod) {
			n++
		}
	}
	return n
}

func (m *podMatcher) any(ni *NodeInfo) bool {
	if m.pins {
		c := ni.labels[m.pin]
		if m.exact || c == 0 {
			return c > 0
		}
	}
	for _, pi := range ni.pods {
		if m.match(pi.pod) {
			return true
		}
	}
	return false
}

func termMatcher(in *interner, t *affinityTerm) podMatcher {
	ns := ""
	switch {
	case t.allNS:
	case t.namespaces == nil:
		ns = t.ownerNS
	case len(t.namespaces) == 1:
		for k := range t.namespaces {
			ns = k
		}
	}
	return newPodMatcher(in, t.selector, ns, t.matches)
}

// topoValue is the node's domain for key; "" when the node is outside every domain.
func topoValue(ni *NodeInfo, key string) string {
	switch key {
	case hostnameKey:
		return ni.hostname
	case v1.LabelTopologyZone:
		return ni.zone
	}
	return ni.node.Labels[key]
}
