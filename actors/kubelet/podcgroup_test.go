package kubelet_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// bounded sets a container's requests and limits to cpu and memory.
func bounded(c corev1.Container, cpu, memory string) corev1.Container {
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	c.Resources = corev1.ResourceRequirements{Requests: l, Limits: l}
	return c
}

// The pod's parent cgroup carries the pod's effective limits, read from the cgroup files of
// a real pod: the app containers and the sidecar summed (850m), unless an init container
// needs more (its 200Mi beats the 128Mi sum); a container without a memory limit leaves the
// pod's memory unbounded while its CPU stays capped.
func TestPodCgroupCarriesTheSumOfLimits(t *testing.T) {
	h := start(t)
	sidecar := corev1.Container{Name: "proxy", Args: []string{"-port", "8081"}, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}
	p := initPod("sum", bounded(appender("setup", 0), "500m", "200Mi"), bounded(sidecar, "100m", "32Mi"))
	p.Spec.Containers[0] = bounded(p.Spec.Containers[0], "250m", "64Mi")
	p.Spec.Containers = append(p.Spec.Containers, bounded(corev1.Container{Name: "side", Image: p.Spec.Containers[0].Image,
		Args: []string{"-port", "8082"}}, "500m", "32Mi"))
	h.create(p)
	partial := pod("partial", func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m")}
	})
	h.create(partial)

	sum := h.waitPod("sum", 60*time.Second, runningReady)
	part := h.waitPod("partial", 60*time.Second, runningReady)
	for _, tc := range []struct {
		pod                   *corev1.Pod
		shares, quota, memory int64 // v1 values; memory -1: unbounded
	}{
		{sum, 870, 85000, 200 << 20},
		{part, 307, 30000, -1},
	} {
		dir := h.n.Runtime.PodCgroup(string(tc.pod.UID))
		if cgroups.Mode() == cgroups.Unified {
			checkV2(t, dir, tc.shares, tc.quota, tc.memory)
			continue
		}
		expect(t, filepath.Join("cpu", dir, "cpu.shares"), tc.shares)
		expect(t, filepath.Join("cpu", dir, "cpu.cfs_quota_us"), tc.quota)
		expect(t, filepath.Join("cpu", dir, "cpu.cfs_period_us"), 100000)
		if tc.memory > 0 {
			expect(t, filepath.Join("memory", dir, "memory.limit_in_bytes"), tc.memory)
		} else if got := readCgroup(t, filepath.Join("memory", dir, "memory.limit_in_bytes")); len(got) < 16 {
			t.Errorf("%s memory.limit_in_bytes %s, want unbounded", dir, got)
		}
	}
}

func checkV2(t *testing.T, dir string, shares, quota, memory int64) {
	t.Helper()
	// cgroup v2 weights map shares 2..262144 onto 1..10000.
	expect(t, filepath.Join(dir, "cpu.weight"), 1+((shares-2)*9999)/262142)
	if got, want := readCgroup(t, filepath.Join(dir, "cpu.max")), strings.Join([]string{strconv.FormatInt(quota, 10), "100000"}, " "); got != want {
		t.Errorf("%s cpu.max %q, want %q", dir, got, want)
	}
	if memory > 0 {
		expect(t, filepath.Join(dir, "memory.max"), memory)
	} else if got := readCgroup(t, filepath.Join(dir, "memory.max")); got != "max" {
		t.Errorf("%s memory.max %q, want max", dir, got)
	}
}

func expect(t *testing.T, rel string, want int64) {
	t.Helper()
	if got := readCgroup(t, rel); got != strconv.FormatInt(want, 10) {
		t.Errorf("%s = %s, want %d", rel, got, want)
	}
}

func readCgroup(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", rel))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
