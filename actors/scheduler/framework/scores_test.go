package framework

import (
	"slices"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// only weighs one score plugin, so a test sees that plugin's preference alone.
func only(plugin string) Options {
	w := map[string]int64{}
	for p := range DefaultWeights {
		w[p] = 0
	}
	w[plugin] = 1
	return Options{Weights: w}
}

func TestScores(t *testing.T) {
	preferZone := func(z string, weight int32) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{
				Weight: weight, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{
					Key: v1.LabelTopologyZone, Operator: v1.NodeSelectorOpIn, Values: []string{z}}}}}}}}
		}
	}
	cases := []struct {
		name      string
		plugin    string
		nodes     []*v1.Node
		existing  []*v1.Pod
		pod       *v1.Pod
		want      string
		wantScore int64
	}{
		{name: "least allocated prefers the emptier node", plugin: NodeResourcesLeastAllocated,
			nodes:    []*v1.Node{node("a", "4", "4Gi"), node("b", "4", "4Gi")},
			existing: []*v1.Pod{pod("x", "2", "2Gi", on("a"))}, pod: pod("p", "1", "1Gi"), want: "b", wantScore: 75},
		{name: "least allocated counts empty requests as defaults", plugin: NodeResourcesLeastAllocated,
			nodes:    []*v1.Node{node("a", "1", "1Gi"), node("b", "1", "1Gi")},
			existing: []*v1.Pod{pod("x", "", "", on("a"))}, pod: pod("p", "", ""), want: "b"},
		{name: "balanced allocation prefers even use", plugin: NodeResourcesBalancedAllocation,
			nodes: []*v1.Node{node("a", "4", "16Gi"), node("b", "4", "4Gi")}, pod: pod("p", "1", "1Gi"), want: "b", wantScore: 100},
		{name: "selector spread avoids nodes with replicas", plugin: SelectorSpread,
			nodes:    []*v1.Node{node("a", "4", "4Gi"), node("b", "4", "4Gi")},
			existing: []*v1.Pod{pod("x", "", "", on("a"), ownedBy("rs1")), pod("y", "", "", on("b"), ownedBy("rs2"))},
			pod:      pod("p", "", "", ownedBy("rs1")), want: "b", wantScore: 100},
		{name: "PreferNoSchedule taint is avoided", plugin: TaintToleration,
			nodes: []*v1.Node{node("a", "4", "4Gi", withTaint("spot", "", v1.TaintEffectPreferNoSchedule)), node("b", "4", "4Gi")},
			pod:   pod("p", "", ""), want: "b", wantScore: 100},
		{name: "preferred node affinity", plugin: NodeAffinity,
			nodes: []*v1.Node{node("a", "4", "4Gi", withLabels(v1.LabelTopologyZone, "z1")), node("b", "4", "4Gi", withLabels(v1.LabelTopologyZone, "z2"))},
			pod:   pod("p", "", "", preferZone("z2", 5)), want: "b", wantScore: 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The tie-breaker keeps the first candidate: a real preference must overrule it
			// whichever order the nodes are evaluated in.
			for _, order := range [][]*v1.Node{tc.nodes, reversed(tc.nodes)} {
				res, err := Schedule(NewSnapshot(order, tc.existing), tc.pod, withIntN(only(tc.plugin), keepFirst))
				if err != nil {
					t.Fatal(err)
				}
				if res.Node != tc.want || (tc.wantScore != 0 && res.Score != tc.wantScore) {
					t.Fatalf("got %s (score %d), want %s (score %d)", res.Node, res.Score, tc.want, tc.wantScore)
				}
			}
		})
	}
}

func TestTolerationsForPreferNoSchedule(t *testing.T) {
	nodes := []*v1.Node{node("a", "4", "4Gi", withTaint("spot", "", v1.TaintEffectPreferNoSchedule)), node("b", "4", "4Gi")}
	tolerant := pod("p", "", "", func(p *v1.Pod) {
		p.Spec.Tolerations = []v1.Toleration{{Key: "spot", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectPreferNoSchedule}}
	})
	// Tolerated, the taint costs nothing: the two nodes tie, so the tie-breaker decides.
	first, _ := Schedule(NewSnapshot(nodes, nil), tolerant, withIntN(only(TaintToleration), keepFirst))
	last, _ := Schedule(NewSnapshot(nodes, nil), tolerant, withIntN(only(TaintToleration), takeLast))
	if first.Node == last.Node {
		t.Fatalf("tolerated taint still scored: both picks are %s", first.Node)
	}
	// A NoSchedule-only toleration does not cover PreferNoSchedule.
	p := pod("q", "", "", func(p *v1.Pod) {
		p.Spec.Tolerations = []v1.Toleration{{Key: "spot", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	})
	if res, _ := Schedule(NewSnapshot(nodes, nil), p, withIntN(only(TaintToleration), takeLast)); res.Node != "b" {
		t.Fatalf("got %s, want b", res.Node)
	}
}

func TestNormalise(t *testing.T) {
	cases := []struct {
		in      []int64
		reverse bool
		want    []int64
	}{
		{[]int64{0, 5, 10}, false, []int64{0, 50, 100}},
		{[]int64{0, 5, 10}, true, []int64{100, 50, 0}},
		{[]int64{0, 0}, false, []int64{0, 0}},
		{[]int64{0, 0}, true, []int64{100, 100}},
	}
	for _, tc := range cases {
		got := slices.Clone(tc.in)
		normalise(got, tc.reverse)
		if !slices.Equal(got, tc.want) {
			t.Errorf("normalise(%v, %v) = %v, want %v", tc.in, tc.reverse, got, tc.want)
		}
	}
}

func TestDefaultWeightsCombine(t *testing.T) {
	// Node a is emptier, but b is the preferred zone: affinity (weight 2 x 100) beats the
	// resource scores' difference.
	nodes := []*v1.Node{node("a", "8", "32Gi"), node("b", "8", "32Gi", withLabels(v1.LabelTopologyZone, "z2"))}
	existing := []*v1.Pod{pod("x", "4", "16Gi", on("b"))}
	p := pod("p", "100m", "128Mi", func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{
			Weight: 1, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{
				Key: v1.LabelTopologyZone, Operator: v1.NodeSelectorOpExists}}}}}}}
	})
	res, err := Schedule(NewSnapshot(nodes, existing), p, Options{})
	if err != nil || res.Node != "b" {
		t.Fatalf("got %+v, %v; want b", res, err)
	}
}

func TestTiesBrokenRandomly(t *testing.T) {
	s := NewSnapshot([]*v1.Node{node("a", "4", "4Gi"), node("b", "4", "4Gi"), node("c", "4", "4Gi")}, nil)
	seen := map[string]int{}
	for i := 0; i < 300; i++ {
		res, err := Schedule(s, pod("p", "100m", ""), Options{})
		if err != nil {
			t.Fatal(err)
		}
		seen[res.Node]++
	}
	if len(seen) != 3 {
		t.Fatalf("identical nodes picked %v: ties are not shared out", seen)
	}
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	cases := []struct{ all, pct, want int }{
		{50, 0, 50}, {100, 0, 100}, {1000, 0, 420}, {5000, 0, 500}, {20000, 0, 1000},
		{1000, 30, 300}, {1000, 100, 1000}, {1000, 5, 100}, {99, 10, 99},
	}
	for _, tc := range cases {
		if got := numFeasibleNodesToFind(tc.all, tc.pct); got != tc.want {
			t.Errorf("numFeasibleNodesToFind(%d, %d) = %d, want %d", tc.all, tc.pct, got, tc.want)
		}
	}
}

func TestRotatingStartAndEarlyStop(t *testing.T) {
	var nodes []*v1.Node
	for i := 0; i < 1000; i++ {
		nodes = append(nodes, node(nodeNameN(i), "4", "4Gi"))
	}
	c := NewCache()
	for _, n := range nodes {
		c.UpsertNode(n)
	}
	s := c.Snapshot()
	var starts []uint64
	for i := 0; i < 3; i++ {
		starts = append(starts, s.rot.Load())
		res, err := Schedule(s, pod("p", "", ""), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Evaluated != 420 || res.Feasible != 420 {
			t.Fatalf("evaluated %d, feasible %d; want 420 of 1000", res.Evaluated, res.Feasible)
		}
	}
	if !slices.Equal(starts, []uint64{0, 420, 840}) {
		t.Fatalf("start indexes %v", starts)
	}
	// When few nodes fit, every node is evaluated.
	p := pod("p", "", "", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{v1.LabelHostname: nodeNameN(7)} })
	res, err := Schedule(c.Snapshot(), p, Options{PercentageOfNodesToScore: 10})
	if err != nil || res.Node != nodeNameN(7) || res.Evaluated != 1000 || res.Feasible != 1 {
		t.Fatalf("got %+v, %v", res, err)
	}
}

func nodeNameN(i int) string { return "n" + strconv.Itoa(i) }

func reversed[T any](s []T) []T { r := slices.Clone(s); slices.Reverse(r); return r }

func keepFirst(n int) int { return 1 % n } // 0 only for the first candidate
func takeLast(int) int    { return 0 }

func withIntN(o Options, f func(int) int) Options { o.IntN = f; return o }

// SelectorSpread's per-node count of the pod's owner is the number of the node's pods that
// owner controls, through adds, owner changes, removals, assumptions and forgets, and an
// older snapshot keeps its own counts.
func TestSelectorSpreadCountsEachOwnersPodsPerNode(t *testing.T) {
	c := NewCache()
	for _, n := range []string{"a", "b", "c"} {
		c.UpsertNode(node(n, "8", "8Gi"))
	}
	owners := []string{"rs1", "rs2", "rs3", "never-seen"}
	check := func(s *Snapshot) {
		t.Helper()
		nodes := s.NodeInfos()
		raw := make([]int64, len(nodes))
		for _, o := range owners {
			cy, err := newCycle(s, pod("new", "", "", ownedBy(o)), nil)
			if err != nil {
				t.Fatal(err)
			}
			selectorSpread{}.Score(cy, nodes, raw)
			for i, ni := range nodes {
				want := 0
				for _, pi := range ni.pods {
					if ref := metav1.GetControllerOf(pi.pod); ref != nil && string(ref.UID) == o {
						want++
					}
				}
				if raw[i] != int64(want) {
					t.Fatalf("owner %s on node %s: score counts %d pods, the node has %d", o, ni.node.Name, raw[i], want)
				}
			}
		}
	}
	var pods []*v1.Pod
	for i := range 12 {
		p := pod("p"+strconv.Itoa(i), "", "", on([]string{"a", "b", "c"}[i%3]), ownedBy(owners[i%3]))
		if i%4 == 3 {
			p.OwnerReferences = nil // some pods have no controller
		}
		c.AddPod(p)
		pods = append(pods, p)
	}
	check(c.Snapshot())
	moved := pods[0].DeepCopy()
	moved.OwnerReferences[0].UID = "rs2"
	c.UpdatePod(pods[0], moved)
	c.RemovePod(pods[4])
	c.RemovePod(pods[7])
	old := c.Snapshot()
	check(old)
	assumed := pod("assumed", "", "", ownedBy("rs1"))
	if err := c.Assume(assumed, "b"); err != nil {
		t.Fatal(err)
	}
	check(c.Snapshot())
	c.Forget(assumed)
	for _, p := range pods[8:] {
		c.RemovePod(p)
	}
	check(c.Snapshot())
	check(old)
}
