package framework

import "math/bits"

// Plugin is one step of a scheduling cycle, named as kube-scheduler names it.
type Plugin interface{ Name() string }

// FilterPlugin rules out the nodes that cannot run a pod.
type FilterPlugin interface {
	Plugin
	// Filter appends why the cycle's pod cannot go to ni; nothing appended means it may.
	Filter(cy *Cycle, ni *NodeInfo, out []string) []string
	// Events are the cluster changes that may make a pod this plugin rejected fit, each with
	// the hint that says whether one does (kube-scheduler's EventsToRegister).
	Events() []EventHint
}

// PreFilter is the optional part of a FilterPlugin that derives what it needs from the whole
// snapshot once per cycle, so that Filter is lookups; skip says it has nothing to check for
// this pod (kube-scheduler's Skip status), so no node pays for it.
type PreFilter interface {
	PreFilter(cy *Cycle, s *Snapshot) (skip bool, err error)
}

// ScorePlugin ranks the nodes that passed every filter.
type ScorePlugin interface {
	Plugin
	// PreScore reports whether the plugin has anything to say about the cycle's pod; when it
	// has not (it would score every node alike) it is skipped.
	PreScore(cy *Cycle) bool
	// Score writes each node's raw score for the cycle's pod to raw (one call per cycle, so
	// the per-node work is the plugin's own).
	Score(cy *Cycle, nodes []*NodeInfo, raw []int64)
	// Normalize says how raw scores become 0..MaxNodeScore.
	Normalize() Normalization
}

// Normalization turns a plugin's raw scores into 0..MaxNodeScore.
type Normalization uint8

const (
	Raw          Normalization = iota // the raw score already is 0..MaxNodeScore
	ByMax                             // scaled by the largest raw score
	ByMaxReverse                      // scaled by the largest, fewer is better
)

// Plugins is every plugin, registered once. Filters run in this order and a node fails at
// the first that rejects it, as in kube-scheduler; Options.Weights names the score plugins.
var Plugins = []Plugin{
	nodeUnschedulable{}, nodeName{}, taintToleration{}, nodeAffinityPlugin{}, nodePorts{},
	nodeResourcesFit{}, volumeBinding{}, podTopologySpread{}, interPodAffinity{},
	leastAllocated{}, balancedAllocation{}, selectorSpread{},
}

var filters, scorers = split(Plugins)

func split(ps []Plugin) (fs []FilterPlugin, ss []ScorePlugin) {
	for _, p := range ps {
		if f, ok := p.(FilterPlugin); ok {
			fs = append(fs, f)
		}
		if s, ok := p.(ScorePlugin); ok {
			ss = append(ss, s)
		}
	}
	if len(fs) > 32 {
		panic("framework: a PluginSet holds at most 32 filters")
	}
	return fs, ss
}

// PluginSet is a set of filter plugins (bit i: the i-th filter of Plugins), such as the ones
// that rejected a pod in its last cycle.
type PluginSet uint32

func (s PluginSet) add(i int) PluginSet { return s | 1<<i }

// Names lists the plugins in the set, in filter order.
func (s PluginSet) Names() []string {
	out := make([]string, 0, bits.OnesCount32(uint32(s)))
	for i, f := range filters {
		if s&(1<<i) != 0 {
			out = append(out, f.Name())
		}
	}
	return out
}

// PluginSetOf is the set of the named filter plugins (unknown names are ignored).
func PluginSetOf(names ...string) PluginSet {
	var s PluginSet
	for i, f := range filters {
		for _, n := range names {
			if f.Name() == n {
				s = s.add(i)
			}
		}
	}
	return s
}

// Each calls f with the index of every plugin in the set, in filter order.
func (s PluginSet) Each(f func(i int)) {
	for s != 0 {
		i := bits.TrailingZeros32(uint32(s))
		f(i)
		s &^= 1 << i
	}
}
