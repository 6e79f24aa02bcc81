package framework

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func node(name, cpu, mem string, opts ...func(*v1.Node)) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem),
			v1.ResourceEphemeralStorage: resource.MustParse("10Gi"), v1.ResourcePods: resource.MustParse("110"),
		}},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func withLabels(kv ...string) func(*v1.Node) {
	return func(n *v1.Node) {
		for i := 0; i < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func withTaint(key, value string, effect v1.TaintEffect) func(*v1.Node) {
	return func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func pod(name, cpu, mem string, opts ...func(*v1.Pod)) *v1.Pod {
	req := v1.ResourceList{}
	if cpu != "" {
		req[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		req[v1.ResourceMemory] = resource.MustParse(mem)
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{}},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func on(nodeName string) func(*v1.Pod) { return func(p *v1.Pod) { p.Spec.NodeName = nodeName } }

func podLabels(kv ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		for i := 0; i < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func ownedBy(uid string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: uid, UID: types.UID(uid), Controller: new(true)}}
	}
}

func hostPortOf(port int32, ip string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, v1.ContainerPort{ContainerPort: 80, HostPort: port, HostIP: ip})
	}
}

func antiAffinity(key string, kv ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		ml := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			ml[kv[i]] = kv[i+1]
		}
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: ml}}}}}
	}
}

func spread(key string, maxSkew int32, kv ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		ml := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			ml[kv[i]] = kv[i+1]
		}
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, v1.TopologySpreadConstraint{
			MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: ml}})
	}
}

func nodeAffinity(reqs ...v1.NodeSelectorRequirement) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: reqs}}}}}
	}
}

// fitReasons schedules p and returns the FitError reasons (nil when it was placed).
func fitReasons(t *testing.T, s *Snapshot, p *v1.Pod) map[string]int {
	t.Helper()
	_, err := Schedule(s, p, Options{})
	if err == nil {
		return nil
	}
	var fe *FitError
	if !errors.As(err, &fe) {
		t.Fatalf("want a FitError, got %v", err)
	}
	return fe.Reasons
}
