package podautoscaler

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func calc() calculator {
	return calculator{tolerance: tolerance{up: 0.1, down: 0.1}, cpuInitialization: 5 * time.Minute, readinessDelay: 30 * time.Second, now: t0}
}

// pod is a running, long-ready pod requesting cpu and memory; phase "" keeps it Running.
func pod(name string, phase corev1.PodPhase, cpu, mem string) *corev1.Pod {
	if phase == "" {
		phase = corev1.PodRunning
	}
	req := corev1.ResourceList{}
	if cpu != "" {
		req[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		req[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	started := metav1.NewTime(t0.Add(-time.Hour))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: req}}}},
		Status: corev1.PodStatus{Phase: phase, StartTime: &started,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started}}},
	}
}

// usage is milli-units per pod, sampled just now over 15 s.
func usage(kv ...any) map[string]podMetric {
	out := map[string]podMetric{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = podMetric{value: int64(kv[i+1].(int)), timestamp: t0, window: 15 * time.Second}
	}
	return out
}

func TestUtilizationReplicas(t *testing.T) {
	cpu50 := resourceTarget{utilization: ptr.To(int32(50))}
	for _, tc := range []struct {
		name     string
		current  int32
		pods     []*corev1.Pod
		usage    map[string]podMetric
		want     int32
		wantUtil int32
	}{
		{"twice the target on 2 pods: 4 times the pods", 2,
			[]*corev1.Pod{pod("a", "", "100m", ""), pod("b", "", "100m", "")}, usage("a", 200, "b", 200), 8, 200},
		{"within the 0.1 tolerance: unchanged", 2,
			[]*corev1.Pod{pod("a", "", "100m", ""), pod("b", "", "100m", "")}, usage("a", 54, "b", 54), 2, 54},
		{"below: fewer pods", 4,
			[]*corev1.Pod{pod("a", "", "100m", ""), pod("b", "", "100m", ""), pod("c", "", "100m", ""), pod("d", "", "100m", "")},
			usage("a", 10, "b", 10, "c", 10, "d", 10), 1, 10},
		// Scaling down, a pod without a sample counts as using its whole request: 40% of the
		// target's 50% keeps 3 pods (the two samples alone would say 1).
		{"missing pod assumed at its request when scaling down", 3,
			[]*corev1.Pod{pod("a", "", "100m", ""), pod("b", "", "100m", ""), pod("c", "", "100m", "")}, usage("a", 10, "b", 10), 3, 10},
		// Scaling up past pending pods counts them at zero: 60m over three requests is below
		// the target, a reversal, so the count stays (the ready pod alone would say 2).
		{"pending pods at zero when scaling up", 3,
			[]*corev1.Pod{pod("a", "", "100m", ""), pod("b", corev1.PodPending, "100m", ""), pod("c", corev1.PodPending, "100m", "")},
			usage("a", 60), 3, 60},
		{"failed and deleted pods ignored", 1,
			[]*corev1.Pod{pod("a", "", "100m", ""), pod("f", corev1.PodFailed, "100m", "")}, usage("a", 100, "f", 1000), 2, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := calc().resourceReplicas(tc.current, cpu50, tc.pods, tc.usage, corev1.ResourceCPU, "")
			if err != nil {
				t.Fatal(err)
			}
			if p.replicas != tc.want || p.utilization == nil || *p.utilization != tc.wantUtil {
				t.Fatalf("replicas %d utilization %v; want %d at %d%%", p.replicas, p.utilization, tc.want, tc.wantUtil)
			}
		})
	}
}

func TestAverageValueReplicas(t *testing.T) {
	mi := int64(1 << 20 * 1000) // one MiB in milli-bytes
	target := resourceTarget{averageValue: 100 * mi}
	pods := []*corev1.Pod{pod("a", "", "", ""), pod("b", "", "", "")}
	u := map[string]podMetric{"a": {value: 200 * mi, timestamp: t0}, "b": {value: 200 * mi, timestamp: t0}}
	p, err := calc().resourceReplicas(2, target, pods, u, corev1.ResourceMemory, "")
	if err != nil || p.replicas != 4 || p.average != 200*mi || p.utilization != nil {
		t.Fatalf("%+v %v; want 4 replicas at 200Mi", p, err)
	}
}

func TestCPUOfAStartingPodCountsOnlyAfterReadiness(t *testing.T) {
	// Started a minute ago, ready 5 s ago: a 15 s sample still covers its start-up burst.
	p := pod("a", "", "100m", "")
	p.Status.StartTime = ptr.To(metav1.NewTime(t0.Add(-time.Minute)))
	p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-5 * time.Second))
	_, err := calc().resourceReplicas(1, resourceTarget{utilization: ptr.To(int32(50))}, []*corev1.Pod{p}, usage("a", 900), corev1.ResourceCPU, "")
	if err != errNoMetrics {
		t.Fatalf("err %v; want %v", err, errNoMetrics)
	}
	// The same sample for memory counts.
	p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("100")
	if _, err := calc().resourceReplicas(1, resourceTarget{utilization: ptr.To(int32(50))}, []*corev1.Pod{p}, usage("a", 900), corev1.ResourceMemory, ""); err != nil {
		t.Fatal(err)
	}
}

func TestUtilizationNeedsRequests(t *testing.T) {
	_, err := calc().resourceReplicas(1, resourceTarget{utilization: ptr.To(int32(50))}, []*corev1.Pod{pod("a", "", "", "")}, usage("a", 10), corev1.ResourceCPU, "")
	if err == nil || !strings.Contains(err.Error(), "missing request for cpu in container app of Pod a") {
		t.Fatalf("err %v; want the missing request named", err)
	}
}

func TestContainerRequestOnly(t *testing.T) {
	p := pod("a", "", "100m", "")
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("900m")}}})
	req, err := podRequests([]*corev1.Pod{p}, corev1.ResourceCPU, "app")
	if err != nil || req["a"] != 100 {
		t.Fatalf("%v %v; want the app container's 100m", req, err)
	}
	if req, _ = podRequests([]*corev1.Pod{p}, corev1.ResourceCPU, ""); req["a"] != 1000 {
		t.Fatalf("%v; want the pod's 1000m", req)
	}
}
