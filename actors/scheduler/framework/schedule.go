// Package framework is Skiff's scheduling algorithm: a cache of nodes and the pods counted
// on them, filter plugins that rule nodes out with Kubernetes' reason strings, and score
// plugins whose weighted, normalised sum picks the node. It does no I/O.
package framework

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Plugin names, as kube-scheduler spells them; Options.Weights is keyed by the score ones.
const (
	NodeUnschedulable               = "NodeUnschedulable"
	NodeName                        = "NodeName"
	TaintToleration                 = "TaintToleration"
	NodeAffinity                    = "NodeAffinity"
	NodePorts                       = "NodePorts"
	NodeResourcesFit                = "NodeResourcesFit"
	PodTopologySpread               = "PodTopologySpread"
	InterPodAffinity                = "InterPodAffinity"
	NodeResourcesLeastAllocated     = "NodeResourcesLeastAllocated"
	NodeResourcesBalancedAllocation = "NodeResourcesBalancedAllocation"
	SelectorSpread                  = "SelectorSpread"
)

// MaxNodeScore is the top of every plugin's normalised score.
const MaxNodeScore = 100

// DefaultWeights are kube-scheduler's default score weights (SelectorSpread as it had).
var DefaultWeights = map[string]int64{
	NodeResourcesLeastAllocated:     1,
	NodeResourcesBalancedAllocation: 1,
	SelectorSpread:                  1,
	TaintToleration:                 3,
	NodeAffinity:                    2,
}

// Options tune a scheduling cycle. The zero value behaves like kube-scheduler's defaults.
type Options struct {
	// PercentageOfNodesToScore caps how many feasible nodes to find before scoring, as a
	// share of all nodes. 0 is adaptive (50% minus 1% per 125 nodes, at least 5%); clusters
	// under 100 nodes, and 100 or more, evaluate every node.
	PercentageOfNodesToScore int
	// Weights overrides score weights by plugin name; a weight of 0 turns a score off.
	Weights map[string]int64
	// IntN picks a winner among tied nodes; nil uses math/rand/v2.
	IntN func(n int) int
	// Volumes reads what a pod's claims ask of a node (VolumeBinding); nil: the plugin
	// checks nothing.
	Volumes VolumeLister
}

func (o *Options) weight(plugin string) int64 {
	if w, ok := o.Weights[plugin]; ok {
		return w
	}
	return DefaultWeights[plugin]
}

// Result is where a pod goes.
type Result struct {
	Node      string
	Score     int64 // the winner's weighted score (0 when only one node was feasible)
	Evaluated int   // nodes run through the filters
	Feasible  int   // of those, nodes that passed
}

// FitError says why no node fits: how many nodes reported each reason, and which filters
// rejected them (their hints decide which cluster events may make the pod fit).
type FitError struct {
	NumAllNodes int
	Reasons     map[string]int
	Rejected    PluginSet
}

// Error renders the Kubernetes message, most frequent reason first, then alphabetical.
func (e *FitError) Error() string {
	if e.NumAllNodes == 0 {
		return "0/0 nodes are available: no nodes registered."
	}
	type kv struct {
		r string
		n int
	}
	rs := make([]kv, 0, len(e.Reasons))
	for r, n := range e.Reasons {
		rs = append(rs, kv{r, n})
	}
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].n != rs[j].n {
			return rs[i].n > rs[j].n
		}
		return rs[i].r < rs[j].r
	})
	parts := make([]string, len(rs))
	for i, x := range rs {
		parts[i] = fmt.Sprintf("%d %s", x.n, x.r)
	}
	return fmt.Sprintf("0/%d nodes are available: %s.", e.NumAllNodes, strings.Join(parts, ", "))
}

// Schedule picks a node for pod. It evaluates nodes from a rotating start so successive
// cycles spread their work, stops once it has enough feasible nodes, scores those and
// returns the best (ties broken at random). The error is a *FitError when nothing fits.
func Schedule(s *Snapshot, pod *v1.Pod, opts Options) (Result, error) {
	n := s.n
	if n == 0 {
		return Result{}, &FitError{Reasons: map[string]int{}}
	}
	cy, err := newCycle(s, pod, opts.Volumes)
	if err != nil {
		return Result{}, err
	}
	want := numFeasibleNodesToFind(n, opts.PercentageOfNodesToScore)
	start := int(s.rot.Load() % uint64(n))
	buf := scratchPool.Get().(*scratch)
	defer buf.put()
	feasible := slices.Grow(buf.feasible[:0], want)
	defer func() { buf.feasible = feasible }()
	var reasons map[string]int
	var rejected PluginSet
	var why [4]string
	evaluated := 0
	for i := 0; i < n && len(feasible) < want; i++ {
		ni := s.node((start + i) % n)
		evaluated++
		failed, by := cy.filter(ni, why[:0])
		if by < 0 {
			feasible = append(feasible, ni)
			continue
		}
		if reasons == nil {
			reasons = map[string]int{}
		}
		for _, r := range failed {
			reasons[r]++
		}
		rejected = rejected.add(by)
	}
	s.rot.Add(uint64(evaluated))
	res := Result{Evaluated: evaluated, Feasible: len(feasible)}
	switch len(feasible) {
	case 0:
		return res, &FitError{NumAllNodes: n, Reasons: reasons, Rejected: rejected}
	case 1:
		res.Node = feasible[0].node.Name
		return res, nil
	}
	scores := cy.score(feasible, &opts, buf.scores)
	buf.scores = scores
	intN := opts.IntN
	if intN == nil {
		intN = rand.IntN
	}
	best, ties := 0, 0
	for i, sc := range scores {
		switch {
		case sc > scores[best]:
			best, ties = i, 1
		case sc == scores[best]:
			// Reservoir sampling: each tied node ends up chosen with equal chance.
			ties++
			if intN(ties) == 0 {
				best = i
			}
		}
	}
	res.Node, res.Score = feasible[best].node.Name, scores[best]
	return res, nil
}

// scratch is a cycle's feasible nodes and scores, kept for the next cycle: at 5,000 nodes
// they were ~12 KB a decision. Workers schedule at once, so each takes its own from a pool.
type scratch struct {
	feasible []*NodeInfo
	scores   []int64
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// put returns the buffers, holding no node infos (they pin old snapshots).
func (b *scratch) put() {
	clear(b.feasible)
	b.feasible = b.feasible[:0]
	scratchPool.Put(b)
}

// numFeasibleNodesToFind mirrors kube-scheduler: small clusters and 100% evaluate all
// nodes; otherwise a percentage (adaptive by default), never fewer than 100 nodes.
func numFeasibleNodesToFind(all, pct int) int {
	const minNodes, minPct = 100, 5
	if all < minNodes || pct >= 100 {
		return all
	}
	if pct <= 0 {
		pct = max(50-all/125, minPct)
	}
	return max(all*pct/100, minNodes)
}
