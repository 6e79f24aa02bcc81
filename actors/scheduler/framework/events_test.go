package framework

import (
	"errors"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/schemas/defaults"
)

func TestNodeChangeIgnoresHeartbeats(t *testing.T) {
	old := node("a", "1", "1Gi")
	beat := old.DeepCopy()
	beat.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(time.Now())}}
	beat.ResourceVersion = "7"
	if a := NodeChange(old, beat); a != 0 {
		t.Fatalf("a heartbeat is a change of %b", a)
	}
	noted := old.DeepCopy() // an annotation no filter reads
	noted.Annotations = map[string]string{"example.com/owner": "ops"}
	if a := NodeChange(old, noted); a != 0 {
		t.Fatalf("an unread annotation is a change of %b", a)
	}
	same := old.DeepCopy() // allocatable written in another unit is no change
	same.Status.Allocatable[v1.ResourceMemory] = resource.MustParse("1024Mi")
	if a := NodeChange(old, same); a != 0 {
		t.Fatalf("1Gi -> 1024Mi is a change of %b", a)
	}
	cases := []struct {
		name   string
		change func(*v1.Node)
		want   ActionType
	}{
		{"allocatable", func(n *v1.Node) { n.Status.Allocatable[v1.ResourceCPU] = resource.MustParse("2") }, UpdateNodeAllocatable},
		{"labels", func(n *v1.Node) { n.Labels["disk"] = "ssd" }, UpdateNodeLabel},
		{"local-path", func(n *v1.Node) {
			n.Annotations = map[string]string{defaults.LocalPathDirAnnotation: "/var/lib/skiff/local-path"}
		}, UpdateNodeLabel},
		{"taints", func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}} }, UpdateNodeTaint},
		{"cordon", func(n *v1.Node) { n.Spec.Unschedulable = true }, UpdateNodeTaint},
	}
	for _, tc := range cases {
		n := old.DeepCopy()
		tc.change(n)
		if got := NodeChange(old, n); got != tc.want {
			t.Errorf("%s: change %b, want %b", tc.name, got, tc.want)
		}
	}
}

func TestAssignedPodEvents(t *testing.T) {
	pending := pod("p", "1", "")
	bound := pod("p", "1", "", on("a"))
	relabelled := bound.DeepCopy()
	relabelled.Labels["app"] = "x"
	done := bound.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	moved := pod("p", "1", "", on("b"))
	actions := func(evs []ClusterEvent) (out []string) {
		for i := range evs {
			out = append(out, evs[i].Label())
		}
		return out
	}
	cases := []struct {
		name     string
		old, now *v1.Pod
		want     []string
	}{
		{"created bound", nil, bound, []string{"AssignedPodAdd"}},
		{"bound", pending, bound, []string{"AssignedPodAdd"}},
		{"pending pod changed", pending, pending, nil},
		{"status of a bound pod", bound, bound.DeepCopy(), nil},
		{"labels", bound, relabelled, []string{"AssignedPodUpdate"}},
		{"ended", bound, done, []string{"AssignedPodDelete"}},
		{"deleted", bound, nil, []string{"AssignedPodDelete"}},
		{"deleted after it ended", done, nil, nil},
		{"moved", bound, moved, []string{"AssignedPodDelete", "AssignedPodAdd"}},
	}
	for _, tc := range cases {
		if got := actions(AssignedPodEvents(tc.old, tc.now)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// rejectedBy schedules p on nodes (with existing pods) and returns the filters that rejected it.
func rejectedBy(t *testing.T, nodes []*v1.Node, existing []*v1.Pod, p *v1.Pod) PluginSet {
	t.Helper()
	_, err := Schedule(NewSnapshot(nodes, existing), p, Options{})
	var fe *FitError
	if !errors.As(err, &fe) {
		t.Fatalf("%s fits: %v", p.Name, err)
	}
	return fe.Rejected
}

// Each filter's hints queue the pod on the events that can undo its rejection, and skip the
// ones that cannot.
func TestHints(t *testing.T) {
	small := node("small", "1", "1Gi")
	tainted := node("t", "4", "4Gi", withTaint("gpu", "", v1.TaintEffectNoSchedule))
	nodeAdd := func(n *v1.Node) *ClusterEvent { return &ClusterEvent{Resource: ResourceNode, Action: Add, Node: n} }
	nodeUpdate := func(old *v1.Node, change func(*v1.Node)) *ClusterEvent {
		n := old.DeepCopy()
		change(n)
		return &ClusterEvent{Resource: ResourceNode, Action: NodeChange(old, n), OldNode: old, Node: n}
	}
	podDelete := func(p *v1.Pod) *ClusterEvent {
		return &ClusterEvent{Resource: ResourceAssignedPod, Action: Delete, Pod: p}
	}
	big := pod("big", "2", "")
	withPort := pod("web", "", "", hostPortOf(8080, ""))
	zonal := pod("z", "1", "", podLabels("app", "z"), spread(v1.LabelTopologyZone, 1, "app", "z"))
	lonely := pod("l", "", "", podLabels("app", "l"), antiAffinity(v1.LabelHostname, "app", "l"))
	ssd := pod("s", "", "", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} })
	zoneA, zoneB := withLabels(v1.LabelTopologyZone, "a"), withLabels(v1.LabelTopologyZone, "b")
	cases := []struct {
		name     string
		rejected PluginSet
		pod      *v1.Pod
		ev       *ClusterEvent
		want     bool
	}{
		{"a node too small", rejectedBy(t, []*v1.Node{small}, nil, big), big, nodeAdd(node("n", "1", "8Gi")), false},
		{"a node big enough", rejectedBy(t, []*v1.Node{small}, nil, big), big, nodeAdd(node("n", "4", "1Gi")), true},
		{"a node grown", rejectedBy(t, []*v1.Node{small}, nil, big), big,
			nodeUpdate(small, func(n *v1.Node) { n.Status.Allocatable[v1.ResourceCPU] = resource.MustParse("2") }), true},
		{"a node shrunk", rejectedBy(t, []*v1.Node{node("n", "4", "4Gi")}, []*v1.Pod{pod("x", "3", "", on("n"))}, big), big,
			nodeUpdate(node("n", "4", "4Gi"), func(n *v1.Node) { n.Status.Allocatable[v1.ResourceCPU] = resource.MustParse("3") }), false},
		{"a pod gone frees room", rejectedBy(t, []*v1.Node{small}, []*v1.Pod{pod("x", "1", "", on("small"))}, pod("q", "1", "")),
			pod("q", "1", ""), podDelete(pod("x", "1", "", on("small"))), true},
		{"resources do not help a taint", rejectedBy(t, []*v1.Node{tainted}, nil, big), big,
			nodeUpdate(tainted, func(n *v1.Node) { n.Status.Allocatable[v1.ResourceCPU] = resource.MustParse("8") }), false},
		{"the taint goes", rejectedBy(t, []*v1.Node{tainted}, nil, big), big,
			nodeUpdate(tainted, func(n *v1.Node) { n.Spec.Taints = nil }), true},
		{"a pod gone does not help a taint", rejectedBy(t, []*v1.Node{tainted}, nil, big), big, podDelete(pod("x", "1", "", on("t"))), false},
		{"uncordoned", rejectedBy(t, []*v1.Node{node("c", "4", "4Gi", func(n *v1.Node) { n.Spec.Unschedulable = true })}, nil, big), big,
			nodeUpdate(node("c", "4", "4Gi", func(n *v1.Node) { n.Spec.Unschedulable = true }), func(n *v1.Node) { n.Spec.Unschedulable = false }), true},
		{"labelled to match", rejectedBy(t, []*v1.Node{small}, nil, ssd), ssd, nodeUpdate(small, withLabels("disk", "ssd")), true},
		{"labelled otherwise", rejectedBy(t, []*v1.Node{small}, nil, ssd), ssd, nodeUpdate(small, withLabels("disk", "hdd")), false},
		{"the port holder goes", rejectedBy(t, []*v1.Node{small}, []*v1.Pod{pod("o", "", "", on("small"), hostPortOf(8080, ""))}, withPort),
			withPort, podDelete(pod("o", "", "", on("small"), hostPortOf(8080, ""))), true},
		{"another port frees nothing", rejectedBy(t, []*v1.Node{small}, []*v1.Pod{pod("o", "", "", on("small"), hostPortOf(8080, ""))}, withPort),
			withPort, podDelete(pod("o2", "", "", on("small"), hostPortOf(9090, ""))), false},
		{"a matching pod elsewhere evens the spread",
			rejectedBy(t, []*v1.Node{node("a1", "4", "4Gi", zoneA), node("b1", "1", "1Gi", zoneB)},
				[]*v1.Pod{pod("z1", "", "", on("a1"), podLabels("app", "z")), pod("z2", "", "", on("a1"), podLabels("app", "z")), pod("full", "1", "", on("b1"))},
				zonal),
			zonal, &ClusterEvent{Resource: ResourceAssignedPod, Action: Add, Pod: pod("z3", "", "", on("b1"), podLabels("app", "z"))}, true},
		{"an unrelated pod leaves the spread alone", PluginSetOf(PodTopologySpread), zonal,
			&ClusterEvent{Resource: ResourceAssignedPod, Action: Add, Pod: pod("o", "", "", on("b1"), podLabels("app", "other"))}, false},
		{"a node without the zone is no domain", PluginSetOf(PodTopologySpread), zonal, nodeAdd(node("n", "1", "1Gi")), false},
		{"a node in a zone is", PluginSetOf(PodTopologySpread), zonal, nodeAdd(node("n", "1", "1Gi", zoneB)), true},
		{"the pod kept away goes", rejectedBy(t, []*v1.Node{small}, []*v1.Pod{pod("l0", "", "", on("small"), podLabels("app", "l"))}, lonely),
			lonely, podDelete(pod("l0", "", "", on("small"), podLabels("app", "l"))), true},
		{"another pod goes", PluginSetOf(InterPodAffinity), lonely, podDelete(pod("o", "", "", on("small"), podLabels("app", "o"))), false},
		{"no nodes: any event", rejectedBy(t, nil, nil, big), big, podDelete(pod("o", "", "", on("small"))), true},
	}
	for _, tc := range cases {
		if got := tc.rejected.WorthRequeuing(tc.pod, tc.ev); got != tc.want {
			t.Errorf("%s (rejected by %v, %s): worth requeuing = %v, want %v", tc.name, tc.rejected.Names(), tc.ev.Label(), got, tc.want)
		}
	}
}

func TestRejectedNamesTheFilters(t *testing.T) {
	nodes := []*v1.Node{node("a", "1", "1Gi"), node("b", "4", "4Gi", withTaint("gpu", "", v1.TaintEffectNoSchedule))}
	got := rejectedBy(t, nodes, nil, pod("p", "2", "")).Names()
	if want := []string{TaintToleration, NodeResourcesFit}; !slices.Equal(got, want) {
		t.Fatalf("rejected by %v, want %v", got, want)
	}
	if s := PluginSetOf(got...); s.Names()[1] != NodeResourcesFit {
		t.Fatalf("PluginSetOf(%v) = %v", got, s.Names())
	}
}
