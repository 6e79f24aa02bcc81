package runtime

import (
	"bufio"
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Kubernetes' CPU conversion: 1 CPU = 1024 shares = a 100 ms quota per
// 100 ms period; BestEffort gets the minimum of 2 shares.
const (
	cpuPeriod    = 100000
	sharesPerCPU = 1024
	minShares    = 2
	minQuota     = 1000
	maxPods      = 110
)

type limits struct {
	MemoryBytes int64
	CPUQuota    int64
	CPUPeriod   uint64
	CPUShares   uint64
}

// limitsFor maps a container's requests/limits to cgroup settings: memory
// limit, CFS quota from the CPU limit, shares from the CPU request (or the
// limit when no request is given, as API defaulting would).
func limitsFor(res corev1.ResourceRequirements) limits {
	var l limits
	if m, ok := res.Limits[corev1.ResourceMemory]; ok {
		l.MemoryBytes = m.Value()
	}
	req, hasReq := res.Requests[corev1.ResourceCPU]
	lim, hasLim := res.Limits[corev1.ResourceCPU]
	if !hasReq && hasLim {
		req, hasReq = lim, true
	}
	l.CPUShares = minShares
	if hasReq {
		if s := uint64(req.MilliValue() * sharesPerCPU / 1000); s > minShares {
			l.CPUShares = s
		}
	}
	if hasLim && lim.MilliValue() > 0 {
		l.CPUPeriod = cpuPeriod
		l.CPUQuota = max(lim.MilliValue()*cpuPeriod/1000, minQuota)
	}
	return l
}

// NodeResources is the machine's capacity: the CPUs this process may run
// on, total memory, and the Kubernetes default pod limit.
func (r *Runtime) NodeResources() (cpu, memory, pods resource.Quantity) {
	return nodeResources()
}

func nodeResources() (cpu, memory, pods resource.Quantity) {
	n := goruntime.NumCPU()
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) == nil && set.Count() > 0 {
		n = set.Count()
	}
	mem, err := memTotal()
	if err != nil {
		var si unix.Sysinfo_t
		if unix.Sysinfo(&si) == nil {
			mem = int64(si.Totalram) * int64(si.Unit)
		}
	}
	return *resource.NewQuantity(int64(n), resource.DecimalSI),
		*resource.NewQuantity(mem, resource.BinarySI),
		*resource.NewQuantity(maxPods, resource.DecimalSI)
}

func memTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("MemTotal not in /proc/meminfo")
}
