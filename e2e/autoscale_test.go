package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/skiff-sh/skiff/actors/agent"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controlplane"
	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// An HPA on CPU utilization scales a CPU-burning Deployment from 1 to more replicas while it
// burns and back to 1 after, and stock kubectl top (metrics.k8s.io) shows the pod's and the
// node's usage as the cgroup files have it over a like window.
func TestHPAScalesABurningDeploymentAndTopMatchesCgroups(t *testing.T) {
	n := startNodeWith(t, nil, func(c *controlplane.Config) { c.Controllers.HPASyncPeriod = 2 * time.Second },
		func(c *agent.Config) { c.StatsInterval = 2 * time.Second })
	// Each pod burns a core for 45 s from its start; a 20m request makes that far above 50%
	// even on a loaded machine. Scale-down waits 5 s instead of 300.
	n.apply(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: burner}
spec:
  replicas: 1
  selector: {matchLabels: {app: burner}}
  template:
    metadata: {labels: {app: burner}}
    spec:
      containers:
      - name: burn
        image: skiff.local/httpecho:v1
        env: [{name: BURN, value: 45s}]
        resources: {requests: {cpu: 20m}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: burner}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: burner}
  minReplicas: 1
  maxReplicas: 3
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
  behavior:
    scaleDown: {stabilizationWindowSeconds: 5}
`)
	first := n.waitReady(t, "app=burner", 1)[0]
	kubectl := func(args ...string) string {
		cmd := exec.Command("/usr/bin/kubectl", append([]string{"--server", n.cp.URL()}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "error: " + err.Error() + ": " + string(out)
		}
		return string(out)
	}
	checkTop(t, n, first, kubectl)

	replicas := func() (int32, string) {
		d := ct.Get[*appsv1.Deployment](t, n.cp, "apps", "deployments", "default", "burner")
		return *d.Spec.Replicas, kubectl("get", "hpa", "burner", "--no-headers")
	}
	start := time.Now()
	testutil.Eventually(t, 90*time.Second, time.Second, func() error {
		if r, hpa := replicas(); r < 2 {
			return fmt.Errorf("%d replicas; hpa: %s", r, hpa)
		}
		return nil
	})
	_, hpa := replicas()
	t.Logf("scaled up after %s: %s", time.Since(start).Round(time.Second), strings.Join(strings.Fields(hpa), " "))
	if !strings.Contains(hpa, "cpu: ") || !strings.Contains(hpa, "%/50%") {
		t.Fatalf("kubectl get hpa TARGETS: %q", hpa)
	}
	hpaKind, _ := schemas.ByResource("autoscaling", "v2", "horizontalpodautoscalers")
	o, err := n.cp.Client.Get(context.Background(), hpaKind, "default", "burner")
	if err != nil {
		t.Fatal(err)
	}
	h := o.(*autoscalingv2.HorizontalPodAutoscaler)
	if c := hpaCondition(h, autoscalingv2.ScalingActive); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "ValidMetricFound" {
		t.Fatalf("ScalingActive: %+v", c)
	}
	if len(h.Status.CurrentMetrics) != 1 || h.Status.CurrentMetrics[0].Resource == nil || h.Status.CurrentMetrics[0].Resource.Current.AverageUtilization == nil {
		t.Fatalf("currentMetrics: %+v", h.Status.CurrentMetrics)
	}

	start = time.Now()
	testutil.Eventually(t, 150*time.Second, time.Second, func() error {
		if r, hpa := replicas(); r != 1 {
			return fmt.Errorf("%d replicas; hpa: %s", r, hpa)
		}
		return nil
	})
	t.Logf("scaled back to 1 after %s more", time.Since(start).Round(time.Second))
	if ev := kubectl("get", "events", "--field-selector", "involvedObject.kind=HorizontalPodAutoscaler"); !strings.Contains(ev, "SuccessfulRescale") {
		t.Fatalf("no SuccessfulRescale event: %s", ev)
	}
}

func hpaCondition(h *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range h.Status.Conditions {
		if h.Status.Conditions[i].Type == t {
			return &h.Status.Conditions[i]
		}
	}
	return nil
}

// checkTop compares kubectl top's figures for pod and the node with the cgroup files: CPU
// against cpuacct.usage over the sampler's window, memory against the working set (usage
// less inactive file pages).
func checkTop(t *testing.T, n *node, pod *corev1.Pod, kubectl func(...string) string) {
	t.Helper()
	if n.agent.Runtime.CgroupV2() {
		t.Fatal("this test reads cgroup v1 files; the node runs v2") // the machine and CI are v1
	}
	var cgroup string
	for _, c := range mustRunning(t, n) {
		if c.PodUID == string(pod.UID) {
			cgroup = c.Cgroup
		}
	}
	if cgroup == "" {
		t.Fatal("the pod's container has no cgroup on the node")
	}
	cpuRate := func(cgroup string, run func()) float64 {
		before, at := readCgroupUint(t, "cpuacct", cgroup, "cpuacct.usage"), time.Now()
		run()
		time.Sleep(2 * time.Second)
		return float64(readCgroupUint(t, "cpuacct", cgroup, "cpuacct.usage")-before) / time.Since(at).Seconds() / 1e9
	}
	testutil.Eventually(t, 30*time.Second, time.Second, func() error {
		var out string
		rate := cpuRate(cgroup, func() { out = kubectl("top", "pod", pod.Name, "--no-headers") })
		ws := workingSet(t, cgroup)
		f := strings.Fields(out)
		if len(f) < 3 || f[0] != pod.Name {
			return fmt.Errorf("kubectl top pod: %q", out)
		}
		cpu, mem := quantity(f[1]), quantity(f[2])
		if cpu < 0.02 || !near(cpu, rate, 0.5, 0.1) {
			return fmt.Errorf("top pod CPU %s, cgroup %.3f cores", f[1], rate)
		}
		if mem <= 0 || !near(mem, float64(ws), 0.25, 2<<20) {
			return fmt.Errorf("top pod memory %s, cgroup working set %d", f[2], ws)
		}
		t.Logf("top pod: %s %s; cgroup %.3f cores, %d bytes", f[1], f[2], rate, ws)
		return nil
	})
	testutil.Eventually(t, 30*time.Second, time.Second, func() error {
		var out string
		rate := cpuRate("", func() { out = kubectl("top", "node", "--no-headers") })
		ws := workingSet(t, "")
		f := strings.Fields(out)
		if len(f) < 4 || f[0] != "e2e-node" {
			return fmt.Errorf("kubectl top node: %q", out)
		}
		cpu, mem := quantity(f[1]), quantity(f[3])
		if cpu < 0.1 || !near(cpu, rate, 0.5, 0.2) {
			return fmt.Errorf("top node CPU %s, root cgroup %.3f cores", f[1], rate)
		}
		if !near(mem, float64(ws), 0.1, 64<<20) {
			return fmt.Errorf("top node memory %s, root cgroup working set %d", f[3], ws)
		}
		t.Logf("top node: %s %s; root cgroup %.3f cores, %d bytes", f[1], f[3], rate, ws)
		return nil
	})
}

func mustRunning(t *testing.T, n *node) []kruntime.RunningContainer {
	t.Helper()
	cs, err := n.agent.Runtime.Running(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func readCgroupUint(t *testing.T, controller, cgroup, file string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", controller, cgroup, file))
	if err != nil {
		t.Fatal(err)
	}
	var v uint64
	if _, err := fmt.Sscan(string(b), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// workingSet is memory.usage_in_bytes less total_inactive_file, read the way a person checks it.
func workingSet(t *testing.T, cgroup string) uint64 {
	t.Helper()
	usage := readCgroupUint(t, "memory", cgroup, "memory.usage_in_bytes")
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", cgroup, "memory.stat"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var v uint64
		if k, rest, ok := strings.Cut(line, " "); ok && k == "total_inactive_file" {
			if _, err := fmt.Sscan(rest, &v); err == nil && v < usage {
				return usage - v
			}
		}
	}
	return usage
}

// quantity is a kubectl figure ("250m", "12Mi") as a number (cores, bytes).
func quantity(s string) float64 {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return -1
	}
	return q.AsApproximateFloat64()
}

// near: within rel of want, or within abs of it.
func near(got, want, rel, abs float64) bool {
	d := got - want
	if d < 0 {
		d = -d
	}
	return d <= abs || d <= rel*want
}
