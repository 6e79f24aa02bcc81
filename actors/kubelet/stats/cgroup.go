package stats

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
)

// Cgroups reads cumulative CPU time and the memory working set from a cgroup filesystem, v1
// (one mount per controller) or v2 (unified). Working set is usage less inactive file pages,
// as the kubelet (cadvisor) reports it and kubectl top shows it.
type Cgroups struct {
	Root string // the cgroupfs mount, /sys/fs/cgroup
	V2   bool
	// Meminfo is /proc/meminfo, the node's memory on v2 (whose root has no memory.current).
	Meminfo string
}

// reading is one cgroup's counters at one moment.
type reading struct {
	cpuNanos   uint64 // cumulative CPU time
	workingSet uint64 // bytes
}

// Read is the cgroup at rel ("" for the root: the whole node).
func (c Cgroups) Read(rel string) (reading, error) {
	if c.V2 {
		return c.readV2(rel)
	}
	cpu, err := readUint(filepath.Join(c.Root, "cpuacct", rel, "cpuacct.usage"))
	if err != nil {
		return reading{}, err
	}
	mem := filepath.Join(c.Root, "memory", rel)
	usage, err := readUint(filepath.Join(mem, "memory.usage_in_bytes"))
	if err != nil {
		return reading{}, err
	}
	inactive, err := kruntime.ReadStatKey(filepath.Join(mem, "memory.stat"), "total_inactive_file")
	if err != nil {
		return reading{}, err
	}
	return reading{cpuNanos: cpu, workingSet: less(usage, inactive)}, nil
}

func (c Cgroups) readV2(rel string) (reading, error) {
	dir := filepath.Join(c.Root, rel)
	usec, err := kruntime.ReadStatKey(filepath.Join(dir, "cpu.stat"), "usage_usec")
	if err != nil {
		return reading{}, err
	}
	var usage, inactive uint64
	if rel == "" {
		// The root has no memory.current: used is total less free, as cadvisor takes it.
		m := c.Meminfo
		var total, free uint64
		if total, err = kruntime.ReadStatKey(m, "MemTotal:"); err == nil {
			if free, err = kruntime.ReadStatKey(m, "MemFree:"); err == nil {
				inactive, err = kruntime.ReadStatKey(m, "Inactive(file):")
			}
		}
		usage, inactive = less(total, free)*1024, inactive*1024
	} else if usage, err = readUint(filepath.Join(dir, "memory.current")); err == nil {
		inactive, err = kruntime.ReadStatKey(filepath.Join(dir, "memory.stat"), "inactive_file")
	}
	if err != nil {
		return reading{}, err
	}
	return reading{cpuNanos: usec * 1000, workingSet: less(usage, inactive)}, nil
}

func less(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

func readUint(file string) (uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	return v, nil
}
