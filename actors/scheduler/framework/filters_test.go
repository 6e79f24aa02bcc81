package framework

import (
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestFilters(t *testing.T) {
	unsched := func(n *v1.Node) { n.Spec.Unschedulable = true }
	tolerate := func(key string, effect v1.TaintEffect) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: key, Operator: v1.TolerationOpExists, Effect: effect})
		}
	}
	zone := func(z string) func(*v1.Node) { return withLabels(v1.LabelTopologyZone, z) }
	cases := []struct {
		name     string
		nodes    []*v1.Node
		existing []*v1.Pod
		pod      *v1.Pod
		want     string         // the node the pod must land on, or
		reasons  map[string]int // why nothing fits
	}{
		{name: "unschedulable node", nodes: []*v1.Node{node("a", "1", "1Gi", unsched)}, pod: pod("p", "100m", ""),
			reasons: map[string]int{"node(s) were unschedulable": 1}},
		{name: "unschedulable tolerated", nodes: []*v1.Node{node("a", "1", "1Gi", unsched)},
			pod: pod("p", "100m", "", tolerate(v1.TaintNodeUnschedulable, v1.TaintEffectNoSchedule)), want: "a"},
		{name: "node name", nodes: []*v1.Node{node("a", "1", "1Gi"), node("b", "1", "1Gi")}, pod: pod("p", "", "", on("b")), want: "b"},
		{name: "node name missing", nodes: []*v1.Node{node("a", "1", "1Gi")}, pod: pod("p", "", "", on("zz")),
			reasons: map[string]int{"node(s) didn't match the requested node name": 1}},
		{name: "NoSchedule taint", nodes: []*v1.Node{node("a", "1", "1Gi", withTaint("gpu", "yes", v1.TaintEffectNoSchedule)), node("b", "1", "1Gi")},
			pod: pod("p", "", ""), want: "b"},
		{name: "NoExecute taint", nodes: []*v1.Node{node("a", "1", "1Gi", withTaint(v1.TaintNodeUnreachable, "", v1.TaintEffectNoExecute))},
			pod: pod("p", "", ""), reasons: map[string]int{"node(s) had untolerated taint {node.kubernetes.io/unreachable: }": 1}},
		{name: "taint tolerated", nodes: []*v1.Node{node("a", "1", "1Gi", withTaint("gpu", "yes", v1.TaintEffectNoSchedule))},
			pod: pod("p", "", "", tolerate("gpu", "")), want: "a"},
		{name: "PreferNoSchedule does not filter", nodes: []*v1.Node{node("a", "1", "1Gi", withTaint("spot", "", v1.TaintEffectPreferNoSchedule))},
			pod: pod("p", "", ""), want: "a"},
		{name: "node selector", nodes: []*v1.Node{node("a", "1", "1Gi"), node("b", "1", "1Gi", withLabels("disk", "ssd"))},
			pod: pod("p", "", "", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }), want: "b"},
		{name: "node selector no match", nodes: []*v1.Node{node("a", "1", "1Gi")},
			pod:     pod("p", "", "", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
			reasons: map[string]int{"node(s) didn't match Pod's node affinity/selector": 1}},
		{name: "affinity In", nodes: []*v1.Node{node("a", "1", "1Gi", zone("z1")), node("b", "1", "1Gi", zone("z2"))},
			pod: pod("p", "", "", nodeAffinity(v1.NodeSelectorRequirement{Key: v1.LabelTopologyZone, Operator: v1.NodeSelectorOpIn, Values: []string{"z2"}})), want: "b"},
		{name: "affinity NotIn", nodes: []*v1.Node{node("a", "1", "1Gi", zone("z1")), node("b", "1", "1Gi", zone("z2"))},
			pod: pod("p", "", "", nodeAffinity(v1.NodeSelectorRequirement{Key: v1.LabelTopologyZone, Operator: v1.NodeSelectorOpNotIn, Values: []string{"z1"}})), want: "b"},
		{name: "affinity Exists", nodes: []*v1.Node{node("a", "1", "1Gi"), node("b", "1", "1Gi", withLabels("gpu", "1"))},
			pod: pod("p", "", "", nodeAffinity(v1.NodeSelectorRequirement{Key: "gpu", Operator: v1.NodeSelectorOpExists})), want: "b"},
		{name: "affinity DoesNotExist", nodes: []*v1.Node{node("a", "1", "1Gi", withLabels("gpu", "1")), node("b", "1", "1Gi")},
			pod: pod("p", "", "", nodeAffinity(v1.NodeSelectorRequirement{Key: "gpu", Operator: v1.NodeSelectorOpDoesNotExist})), want: "b"},
		{name: "affinity Gt", nodes: []*v1.Node{node("a", "1", "1Gi", withLabels("gen", "3")), node("b", "1", "1Gi", withLabels("gen", "5"))},
			pod: pod("p", "", "", nodeAffinity(v1.NodeSelectorRequirement{Key: "gen", Operator: v1.NodeSelectorOpGt, Values: []string{"4"}})), want: "b"},
		{name: "affinity Lt", nodes: []*v1.Node{node("a", "1", "1Gi", withLabels("gen", "3")), node("b", "1", "1Gi", withLabels("gen", "5"))},
			pod: pod("p", "", "", nodeAffinity(v1.NodeSelectorRequirement{Key: "gen", Operator: v1.NodeSelectorOpLt, Values: []string{"4"}})), want: "a"},
		{name: "affinity matchFields metadata.name", nodes: []*v1.Node{node("a", "1", "1Gi"), node("b", "1", "1Gi")},
			pod: pod("p", "", "", func(p *v1.Pod) {
				p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
					NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"b"}}}}}}}}
			}), want: "b"},
		{name: "insufficient cpu and memory", nodes: []*v1.Node{node("a", "1", "1Gi")},
			existing: []*v1.Pod{pod("x", "800m", "900Mi", on("a"))}, pod: pod("p", "300m", "200Mi"),
			reasons: map[string]int{"Insufficient cpu": 1, "Insufficient memory": 1}},
		{name: "fits exactly", nodes: []*v1.Node{node("a", "1", "1Gi")},
			existing: []*v1.Pod{pod("x", "700m", "", on("a"))}, pod: pod("p", "300m", ""), want: "a"},
		{name: "insufficient ephemeral-storage", nodes: []*v1.Node{node("a", "1", "1Gi")},
			pod: pod("p", "", "", func(p *v1.Pod) {
				p.Spec.Containers[0].Resources.Requests[v1.ResourceEphemeralStorage] = resource.MustParse("20Gi")
			}), reasons: map[string]int{"Insufficient ephemeral-storage": 1}},
		{name: "extended resource", nodes: []*v1.Node{node("a", "1", "1Gi"), node("b", "1", "1Gi", func(n *v1.Node) {
			n.Status.Allocatable["example.com/gpu"] = resource.MustParse("1")
		})}, pod: pod("p", "", "", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests["example.com/gpu"] = resource.MustParse("1") }), want: "b"},
		{name: "too many pods", nodes: []*v1.Node{node("a", "1", "1Gi", func(n *v1.Node) { n.Status.Allocatable[v1.ResourcePods] = resource.MustParse("1") })},
			existing: []*v1.Pod{pod("x", "", "", on("a"))}, pod: pod("p", "", ""), reasons: map[string]int{"Too many pods": 1}},
		{name: "init container peak counts", nodes: []*v1.Node{node("a", "1", "1Gi")},
			pod: pod("p", "100m", "", func(p *v1.Pod) {
				p.Spec.InitContainers = []v1.Container{{Name: "i", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}}}
			}), reasons: map[string]int{"Insufficient cpu": 1}},
		{name: "overhead counts", nodes: []*v1.Node{node("a", "1", "1Gi")},
			pod:     pod("p", "900m", "", func(p *v1.Pod) { p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m")} }),
			reasons: map[string]int{"Insufficient cpu": 1}},
		{name: "host port taken", nodes: []*v1.Node{node("a", "1", "1Gi"), node("b", "1", "1Gi")},
			existing: []*v1.Pod{pod("x", "", "", on("a"), hostPortOf(8080, ""))}, pod: pod("p", "", "", hostPortOf(8080, "")), want: "b"},
		{name: "host port specific ip vs any", nodes: []*v1.Node{node("a", "1", "1Gi")},
			existing: []*v1.Pod{pod("x", "", "", on("a"), hostPortOf(8080, "10.0.0.1"))}, pod: pod("p", "", "", hostPortOf(8080, "")),
			reasons: map[string]int{"node(s) didn't have free ports for the requested pod ports": 1}},
		{name: "host ports on different ips", nodes: []*v1.Node{node("a", "1", "1Gi")},
			existing: []*v1.Pod{pod("x", "", "", on("a"), hostPortOf(8080, "10.0.0.1"))}, pod: pod("p", "", "", hostPortOf(8080, "10.0.0.2")), want: "a"},
		{name: "anti-affinity", nodes: []*v1.Node{node("a", "1", "1Gi"), node("b", "1", "1Gi")},
			existing: []*v1.Pod{pod("x", "", "", on("a"), podLabels("app", "db"))}, pod: pod("p", "", "", podLabels("app", "db"), antiAffinity(v1.LabelHostname, "app", "db")), want: "b"},
		{name: "anti-affinity everywhere", nodes: []*v1.Node{node("a", "1", "1Gi")},
			existing: []*v1.Pod{pod("x", "", "", on("a"), podLabels("app", "db"))}, pod: pod("p", "", "", antiAffinity(v1.LabelHostname, "app", "db")),
			reasons: map[string]int{"node(s) didn't match pod anti-affinity rules": 1}},
		{name: "anti-affinity other namespace ignored", nodes: []*v1.Node{node("a", "1", "1Gi")},
			existing: []*v1.Pod{pod("x", "", "", on("a"), podLabels("app", "db"), func(p *v1.Pod) { p.Namespace = "other" })},
			pod:      pod("p", "", "", antiAffinity(v1.LabelHostname, "app", "db")), want: "a"},
		{name: "existing pod's anti-affinity", nodes: []*v1.Node{node("a", "1", "1Gi"), node("b", "1", "1Gi")},
			existing: []*v1.Pod{pod("x", "", "", on("a"), antiAffinity(v1.LabelHostname, "app", "web"))}, pod: pod("p", "", "", podLabels("app", "web")), want: "b"},
		{name: "existing pod's anti-affinity everywhere", nodes: []*v1.Node{node("a", "1", "1Gi")},
			existing: []*v1.Pod{pod("x", "", "", on("a"), antiAffinity(v1.LabelHostname, "app", "web"))}, pod: pod("p", "", "", podLabels("app", "web")),
			reasons: map[string]int{"node(s) didn't satisfy existing pods anti-affinity rules": 1}},
		{name: "zone anti-affinity", nodes: []*v1.Node{node("a", "1", "1Gi", zone("z1")), node("b", "1", "1Gi", zone("z1")), node("c", "1", "1Gi", zone("z2"))},
			existing: []*v1.Pod{pod("x", "", "", on("a"), podLabels("app", "db"))}, pod: pod("p", "", "", antiAffinity(v1.LabelTopologyZone, "app", "db")), want: "c"},
		{name: "existing zone anti-affinity", nodes: []*v1.Node{node("a", "1", "1Gi", zone("z1")), node("b", "1", "1Gi", zone("z1")), node("c", "1", "1Gi", zone("z2"))},
			existing: []*v1.Pod{pod("x", "", "", on("a"), antiAffinity(v1.LabelTopologyZone, "app", "web"))}, pod: pod("p", "", "", podLabels("app", "web")), want: "c"},
		{name: "spread by host", nodes: []*v1.Node{node("a", "1", "1Gi"), node("b", "1", "1Gi")},
			existing: []*v1.Pod{pod("x", "", "", on("a"), podLabels("app", "web"))}, pod: pod("p", "", "", podLabels("app", "web"), spread(v1.LabelHostname, 1, "app", "web")), want: "b"},
		{name: "spread by zone", nodes: []*v1.Node{node("a", "1", "1Gi", zone("z1")), node("b", "1", "1Gi", zone("z1")), node("c", "1", "1Gi", zone("z2"))},
			existing: []*v1.Pod{pod("x", "", "", on("a"), podLabels("app", "web"))}, pod: pod("p", "", "", podLabels("app", "web"), spread(v1.LabelTopologyZone, 1, "app", "web")), want: "c"},
		{name: "spread skew allowed", nodes: []*v1.Node{node("a", "1", "1Gi", zone("z1")), node("c", "1", "1Gi", zone("z2"))},
			existing: []*v1.Pod{pod("x", "", "", on("a"), podLabels("app", "web"))}, pod: pod("p", "", "", podLabels("app", "web"), spread(v1.LabelTopologyZone, 2, "app", "web"),
				func(p *v1.Pod) { p.Spec.NodeName = "a" }), want: "a"},
		{name: "spread violated", nodes: []*v1.Node{node("a", "1", "1Gi", zone("z1")), node("c", "1", "1Gi", zone("z2"))},
			existing: []*v1.Pod{pod("x", "", "", on("a"), podLabels("app", "web"))}, pod: pod("p", "", "", podLabels("app", "web"), spread(v1.LabelTopologyZone, 1, "app", "web"),
				func(p *v1.Pod) { p.Spec.NodeName = "a" }),
			reasons: map[string]int{"node(s) didn't match pod topology spread constraints": 1, "node(s) didn't match the requested node name": 1}},
		{name: "spread missing label", nodes: []*v1.Node{node("a", "1", "1Gi"), node("c", "1", "1Gi", zone("z2"))},
			pod: pod("p", "", "", podLabels("app", "web"), spread(v1.LabelTopologyZone, 1, "app", "web")), want: "c"},
		{name: "spread ignores nodes outside node affinity", nodes: []*v1.Node{node("a", "1", "1Gi", zone("z1")), node("c", "1", "1Gi", zone("z2"), withLabels("pool", "x"))},
			existing: []*v1.Pod{pod("x", "", "", on("c"), podLabels("app", "web"))},
			pod:      pod("p", "", "", podLabels("app", "web"), spread(v1.LabelTopologyZone, 1, "app", "web"), func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"pool": "x"} }),
			want:     "c"},
		{name: "ScheduleAnyway does not filter", nodes: []*v1.Node{node("a", "1", "1Gi", zone("z1")), node("c", "1", "1Gi", zone("z2"))},
			existing: []*v1.Pod{pod("x", "", "", on("a"), podLabels("app", "web")), pod("y", "", "", on("a"), podLabels("app", "web"))},
			pod: pod("p", "", "", podLabels("app", "web"), spread(v1.LabelTopologyZone, 1, "app", "web"), func(p *v1.Pod) {
				p.Spec.TopologySpreadConstraints[0].WhenUnsatisfiable = v1.ScheduleAnyway
				p.Spec.NodeName = "a"
			}), want: "a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSnapshot(tc.nodes, tc.existing)
			res, err := Schedule(s, tc.pod, Options{})
			if tc.reasons != nil {
				got := fitReasons(t, s, tc.pod)
				if !maps.Equal(got, tc.reasons) {
					t.Fatalf("reasons = %v, want %v (result %+v)", got, tc.reasons, res)
				}
				return
			}
			if err != nil {
				t.Fatalf("Schedule: %v", err)
			}
			if res.Node != tc.want {
				t.Fatalf("placed on %q, want %q", res.Node, tc.want)
			}
		})
	}
}

func TestFitErrorMessage(t *testing.T) {
	s := NewSnapshot([]*v1.Node{
		node("a", "1", "1Gi"), node("b", "1", "1Gi"),
		node("c", "4", "4Gi", withTaint(v1.TaintNodeUnreachable, "", v1.TaintEffectNoExecute)),
	}, nil)
	_, err := Schedule(s, pod("p", "2", ""), Options{})
	want := "0/3 nodes are available: 2 Insufficient cpu, 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }."
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v\nwant    %s", err, want)
	}
	// Equal counts sort by reason.
	fe := &FitError{NumAllNodes: 4, Reasons: map[string]int{"Too many pods": 2, "Insufficient memory": 2}}
	if got := fe.Error(); got != "0/4 nodes are available: 2 Insufficient memory, 2 Too many pods." {
		t.Fatalf("got %q", got)
	}
	if _, err := Schedule(NewSnapshot(nil, nil), pod("p", "", ""), Options{}); err == nil || err.Error() != "0/0 nodes are available: no nodes registered." {
		t.Fatalf("empty cluster: %v", err)
	}
}

func TestPodRequests(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	c := func(cpu string) v1.Container {
		return v1.Container{Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}
	}
	sidecar := c("300m")
	sidecar.RestartPolicy = &always
	cases := []struct {
		name    string
		spec    v1.PodSpec
		wantCPU int64
	}{
		{"sum of containers", v1.PodSpec{Containers: []v1.Container{c("100m"), c("200m")}}, 300},
		{"init peak wins", v1.PodSpec{InitContainers: []v1.Container{c("1"), c("500m")}, Containers: []v1.Container{c("100m")}}, 1000},
		{"containers win", v1.PodSpec{InitContainers: []v1.Container{c("100m")}, Containers: []v1.Container{c("300m")}}, 300},
		{"sidecar adds to containers", v1.PodSpec{InitContainers: []v1.Container{sidecar}, Containers: []v1.Container{c("200m")}}, 500},
		{"init after sidecar runs beside it", v1.PodSpec{InitContainers: []v1.Container{sidecar, c("1")}, Containers: []v1.Container{c("100m")}}, 1300},
		{"overhead", v1.PodSpec{Containers: []v1.Container{c("100m")}, Overhead: v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m")}}, 150},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := podRequests(&v1.Pod{Spec: tc.spec})
			if req.MilliCPU != tc.wantCPU {
				t.Fatalf("cpu = %dm, want %dm", req.MilliCPU, tc.wantCPU)
			}
		})
	}
	_, nz := podRequests(&v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{}}}})
	if nz.MilliCPU != defaultMilliCPU || nz.Memory != defaultMemory {
		t.Fatalf("non-zero defaults = %+v", nz)
	}
}
