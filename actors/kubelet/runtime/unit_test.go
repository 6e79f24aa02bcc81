package runtime

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/identifiers"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/skiff-sh/skiff/testkit/needs"
)

func TestLimitsFor(t *testing.T) {
	q := resource.MustParse
	for _, tc := range []struct {
		name string
		res  corev1.ResourceRequirements
		want Limits
	}{
		{"best effort", corev1.ResourceRequirements{}, Limits{CPUShares: 2}},
		{"request only", corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("500m")}},
			Limits{CPUShares: 512}},
		{"limit defaults request", corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceCPU: q("250m"), corev1.ResourceMemory: q("64Mi")}},
			Limits{MemoryBytes: 64 << 20, CPUQuota: 25000, CPUPeriod: 100000, CPUShares: 256}},
		{"tiny limit floors quota", corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q("1m")}},
			Limits{CPUQuota: 1000, CPUPeriod: 100000, CPUShares: 2}},
		{"two cpus", corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("1")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: q("2")}},
			Limits{CPUQuota: 200000, CPUPeriod: 100000, CPUShares: 1024}},
	} {
		if got := limitsFor(tc.res); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestConflist(t *testing.T) {
	b, err := conflist(Options{Root: "/data", PodCIDR: "10.1.2.0/24", Bridge: "br-test"})
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Plugins []struct {
			Type   string `json:"type"`
			Bridge string `json:"bridge"`
			IPAM   struct {
				Type    string                `json:"type"`
				Ranges  [][]map[string]string `json:"ranges"`
				DataDir string                `json:"dataDir"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Plugins) != 3 || c.Plugins[0].Type != "bridge" || c.Plugins[1].Type != "portmap" || c.Plugins[2].Type != "firewall" {
		t.Fatalf("plugins %+v", c.Plugins)
	}
	br := c.Plugins[0]
	if br.Bridge != "br-test" || br.IPAM.Type != "host-local" || br.IPAM.Ranges[0][0]["subnet"] != "10.1.2.0/24" ||
		br.IPAM.DataDir != "/data/cni/ipam" {
		t.Errorf("bridge %+v", br)
	}
	if _, err := conflist(Options{PodCIDR: "nope"}); err == nil {
		t.Error("bad CIDR: want an error")
	}
}

func TestIDsAreValidAndStable(t *testing.T) {
	long := "a-container-name-that-is-as-long-as-kubernetes-allows-63-chars"
	for _, id := range []string{
		sandboxID("0d7c1a64-2f1e-4b0e-9c57-1f2f6a8e3b11"),
		sandboxID("weird/uid with spaces"),
		containerID("uid", "web", 0),
		containerID("uid", long, 12345),
	} {
		if err := identifiers.Validate(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	if containerID("u", "web", 1) == containerID("u", "web", 2) || containerID("u", "web", 1) != containerID("u", "web", 1) {
		t.Error("container IDs must be unique per attempt and stable")
	}
	if safeName("../x") == "../x" || safeName("abc") != "abc" {
		t.Error("safeName")
	}
}

func TestKeyedMutexSerialisesPerKey(t *testing.T) {
	var k keyedMutex
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock := k.lock("pod")
			n := inside.Add(1)
			if n > maxInside.Load() {
				maxInside.Store(n)
			}
			inside.Add(-1)
			unlock()
		}()
	}
	wg.Wait()
	if maxInside.Load() != 1 {
		t.Errorf("%d holders at once", maxInside.Load())
	}
	if len(k.m) != 0 {
		t.Errorf("entries leak: %v", k.m)
	}
}

func TestReadCounter(t *testing.T) {
	f := filepath.Join(t.TempDir(), "memory.oom_control")
	if err := os.WriteFile(f, []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := readCounter(f, "oom_kill"); err != nil || n != 3 {
		t.Errorf("got %d, %v", n, err)
	}
	if _, err := readCounter(f, "missing"); err == nil {
		t.Error("missing key: want an error")
	}
}

func TestNodeResources(t *testing.T) {
	cpu, mem, pods := nodeResources()
	if cpu.Value() < 1 || mem.Value() < 64<<20 || pods.Value() != maxPods {
		t.Errorf("cpu=%s memory=%s pods=%s", cpu.String(), mem.String(), pods.String())
	}
}

func TestPodResourcesFor(t *testing.T) {
	ctr := func(cpu, memory string) corev1.Container {
		l := corev1.ResourceList{}
		if cpu != "" {
			l[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if memory != "" {
			l[corev1.ResourceMemory] = resource.MustParse(memory)
		}
		return corev1.Container{Resources: corev1.ResourceRequirements{Requests: l, Limits: l}}
	}
	sidecar := func(c corev1.Container) corev1.Container {
		always := corev1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
		return c
	}
	for _, tc := range []struct {
		name       string
		init, apps []corev1.Container
		want       Limits
	}{
		{"best effort", nil, []corev1.Container{{}}, Limits{CPUShares: 2}},
		{"apps summed", nil, []corev1.Container{ctr("250m", "64Mi"), ctr("500m", "32Mi")},
			Limits{CPUShares: 768, CPUQuota: 75000, CPUPeriod: 100000, MemoryBytes: 96 << 20}},
		{"a larger init container wins", []corev1.Container{ctr("2", "256Mi")}, []corev1.Container{ctr("250m", "64Mi")},
			Limits{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000, MemoryBytes: 256 << 20}},
		// The init container after the sidecar runs beside it: 1 + 0.1 CPU beats 0.85.
		{"sidecar counted with the apps and later inits",
			[]corev1.Container{sidecar(ctr("100m", "16Mi")), ctr("1", "32Mi")}, []corev1.Container{ctr("250m", "64Mi"), ctr("500m", "32Mi")},
			Limits{CPUShares: 1126, CPUQuota: 110000, CPUPeriod: 100000, MemoryBytes: 112 << 20}},
		{"one container without a memory limit leaves memory unbounded", nil, []corev1.Container{ctr("250m", "64Mi"), ctr("500m", "")},
			Limits{CPUShares: 768, CPUQuota: 75000, CPUPeriod: 100000}},
		{"an init container without a CPU limit leaves CPU unbounded", []corev1.Container{ctr("", "16Mi")}, []corev1.Container{ctr("250m", "64Mi")},
			Limits{CPUShares: 256, MemoryBytes: 64 << 20}},
	} {
		pod := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: tc.init, Containers: tc.apps}}
		if got := PodResourcesFor(pod); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// A process left in a pod's cgroup (a container started while its pod was torn down) is
// killed, so the group can go.
func TestRmdirTreeKillsWhatIsLeftInTheGroup(t *testing.T) {
	root := filepath.Join(cgroupRoot, "pids")
	if os.Geteuid() != 0 || !fileExistsAt(root) {
		needs.Skip(t, "needs root and the cgroup v1 pids hierarchy")
	}
	dir := filepath.Join(root, "skiff-rmdir-test-"+strconv.Itoa(os.Getpid()), "pod1", "c1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rmdirTree(filepath.Dir(filepath.Dir(dir))) })
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		t.Fatal(err)
	}
	tree := filepath.Dir(dir)
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = rmdirTree(tree); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("the group stays: %v", err)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the process in the group was not killed")
	}
	if fileExistsAt(tree) {
		t.Fatal("the group's directory is still there")
	}
}

func fileExistsAt(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
