package framework

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The benchmark cluster: 5,000 nodes of 8 cpu / 32Gi in 5 zones, 10 pods already on each,
// and a stream of pods (100m / 128Mi) with a mix of the constraints real workloads use.
const (
	benchNodes       = 5000
	benchPodsPerNode = 10
	benchZones       = 5
	benchRunPods     = 20000
)

// RunBench prints one table row: scheduling decisions per second (Schedule plus Assume)
// on the benchmark cluster, and the latency of one decision.
func RunBench(w io.Writer) error {
	c := benchCluster()
	pods := make([]*v1.Pod, benchRunPods)
	for i := range pods {
		pods[i] = benchPod(i)
	}
	lat := make([]time.Duration, 0, benchRunPods)
	start := time.Now()
	for i := 0; i < benchRunPods; i++ {
		t := time.Now()
		if _, err := benchScheduleOne(c, pods[i]); err != nil {
			return err
		}
		lat = append(lat, time.Since(t))
	}
	elapsed := time.Since(start)
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(float64(len(lat)-1)*p)].Round(time.Microsecond) }
	_, err := fmt.Fprintf(w, "scheduler, %d nodes, %d pods (schedule+assume)\t%.0f pods/s\tp50 %v\tp99 %v\n",
		benchNodes, benchRunPods, float64(benchRunPods)/elapsed.Seconds(), pct(0.50), pct(0.99))
	return err
}

func benchScheduleOne(c *Cache, pod *v1.Pod) (Result, error) {
	res, err := Schedule(c.Snapshot(), pod, Options{})
	if err != nil {
		return res, fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	return res, c.Assume(pod, res.Node)
}

func benchCluster() *Cache {
	c := NewCache()
	for i := 0; i < benchNodes; i++ {
		name := "node-" + strconv.Itoa(i)
		n := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				v1.LabelHostname:      name,
				v1.LabelTopologyZone:  "zone-" + strconv.Itoa(i%benchZones),
				v1.LabelOSStable:      "linux",
				"disktype":            []string{"ssd", "hdd"}[i%2],
				"node.skiff.sh/group": "g" + strconv.Itoa(i%10),
			}},
			Status: v1.NodeStatus{Allocatable: v1.ResourceList{
				v1.ResourceCPU:              resource.MustParse("8"),
				v1.ResourceMemory:           resource.MustParse("32Gi"),
				v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
				v1.ResourcePods:             resource.MustParse("110"),
			}},
		}
		switch {
		case i%10 == 3:
			n.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "batch", Effect: v1.TaintEffectNoSchedule}}
		case i%20 == 7:
			n.Spec.Taints = []v1.Taint{{Key: "spot", Effect: v1.TaintEffectPreferNoSchedule}}
		case i%50 == 11:
			n.Spec.Unschedulable = true
		}
		c.UpsertNode(n)
	}
	for i := 0; i < benchNodes*benchPodsPerNode; i++ {
		p := benchPod(-1 - i)
		p.Spec.NodeName = "node-" + strconv.Itoa(i%benchNodes)
		p.Spec.Affinity, p.Spec.TopologySpreadConstraints = nil, nil // keep the base load plain
		c.AddPod(p)
	}
	return c
}

// benchPod returns pod i of the stream: half plain replicas, the rest spread over zones or
// hosts, anti-affine per host, pinned by node selector, tolerating a taint with a host
// port, or with init containers and overhead.
func benchPod(i int) *v1.Pod {
	k := i
	if k < 0 {
		k = -k
	}
	group := strconv.Itoa(k % 50)
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: "p" + strconv.Itoa(i), UID: types.UID("uid-" + strconv.Itoa(i)),
			Labels: map[string]string{"app": "web-" + group},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
				Name: "web-" + group, UID: types.UID("rs-" + group), Controller: new(true)}},
		},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")},
		}}}},
	}
	switch k % 20 {
	case 10, 11, 12:
		p.Labels = map[string]string{"app": "zonal-" + group}
		p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone,
			WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: p.Labels}}}
	case 13, 14:
		p.Labels = map[string]string{"app": "anti-" + strconv.Itoa(k%20)}
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: v1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{MatchLabels: p.Labels}}}}}
	case 15, 16:
		p.Spec.NodeSelector = map[string]string{"disktype": "ssd"}
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{
			Weight: 10, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{
				Key: v1.LabelTopologyZone, Operator: v1.NodeSelectorOpIn, Values: []string{"zone-1", "zone-2"}}}}}}}}
	case 17:
		p.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "batch", Effect: v1.TaintEffectNoSchedule}}
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: int32(30000 + k%100)}}
	case 18:
		p.Labels = map[string]string{"app": "host-spread-" + group}
		p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelHostname,
			WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: p.Labels}}}
	case 19:
		p.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")}}}}
		p.Spec.Overhead = v1.ResourceList{v1.ResourceMemory: resource.MustParse("16Mi")}
	}
	return p
}
