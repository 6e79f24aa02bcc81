package stats

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
)

func write(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The files' formats as the kernel writes them; the live ones are checked by the e2e test.
func TestReadCgroupV1AndV2(t *testing.T) {
	v1 := t.TempDir()
	write(t, v1, "cpuacct/skiff/pod1/c/cpuacct.usage", "2500000000\n")
	write(t, v1, "memory/skiff/pod1/c/memory.usage_in_bytes", "10485760\n")
	write(t, v1, "memory/skiff/pod1/c/memory.stat", "cache 4096\ninactive_file 1\ntotal_inactive_file 2097152\n")
	r, err := Cgroups{Root: v1}.Read("/skiff/pod1/c")
	if err != nil || r.cpuNanos != 2_500_000_000 || r.workingSet != 8<<20 {
		t.Fatalf("v1: %+v %v; want 2.5 s and 8 MiB", r, err)
	}

	v2 := t.TempDir()
	write(t, v2, "skiff/pod1/c/cpu.stat", "usage_usec 1500000\nuser_usec 1000000\n")
	write(t, v2, "skiff/pod1/c/memory.current", "4194304\n")
	write(t, v2, "skiff/pod1/c/memory.stat", "anon 1\ninactive_file 1048576\n")
	write(t, v2, "cpu.stat", "usage_usec 9000000\n")
	write(t, v2, "meminfo", "MemTotal:       1000 kB\nMemFree:         200 kB\nInactive(file):  100 kB\n")
	c := Cgroups{Root: v2, V2: true, Meminfo: filepath.Join(v2, "meminfo")}
	if r, err = c.Read("/skiff/pod1/c"); err != nil || r.cpuNanos != 1_500_000_000 || r.workingSet != 3<<20 {
		t.Fatalf("v2 container: %+v %v; want 1.5 s and 3 MiB", r, err)
	}
	if r, err = c.Read(""); err != nil || r.cpuNanos != 9_000_000_000 || r.workingSet != 700*1024 {
		t.Fatalf("v2 node: %+v %v; want 9 s and 700 KiB", r, err)
	}
	if _, err := c.Read("/skiff/gone"); err == nil {
		t.Fatal("a missing cgroup read without error")
	}
}

func TestWindowedUsage(t *testing.T) {
	a := kruntime.RunningContainer{PodUID: "u1", Name: "app", Cgroup: "/a"}
	b := kruntime.RunningContainer{PodUID: "u2", Name: "app", Cgroup: "/b"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &window{}
	first := w.observe(&sampled{at: t0, node: &reading{cpuNanos: 0, workingSet: 100},
		containers: map[kruntime.RunningContainer]reading{a: {cpuNanos: 1e9, workingSet: 10}}})
	if first.Node != nil || len(first.Containers) != 0 {
		t.Fatalf("one sample gave figures: %+v", first)
	}
	// 10 s later: a used 5 s of CPU (half a core); b is new and has no rate yet.
	rep := w.observe(&sampled{at: t0.Add(10 * time.Second), node: &reading{cpuNanos: 20e9, workingSet: 200},
		containers: map[kruntime.RunningContainer]reading{a: {cpuNanos: 6e9, workingSet: 30}, b: {cpuNanos: 1e9}}})
	if rep.Node == nil || rep.Node.CPUNanoCores != 2e9 || rep.Node.MemoryBytes != 200 || rep.Node.Window != 10*time.Second {
		t.Fatalf("node: %+v; want 2 cores, 200 bytes over 10 s", rep.Node)
	}
	if len(rep.Containers) != 1 || rep.Containers[0].PodUID != "u1" || rep.Containers[0].CPUNanoCores != 5e8 ||
		rep.Containers[0].MemoryBytes != 30 || !rep.Containers[0].Timestamp.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("containers: %+v; want u1 at half a core, 30 bytes", rep.Containers)
	}
}
