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
	resourcehelper "k8s.io/component-helpers/resource"
)

// Kubernetes' CPU conversion: 1 CPU = 1024 shares = a 100 ms quota per
// 100 ms period; BestEffort gets the minimum of 2 shares.
const (
	cpuPeriod    = 100000
	sharesPerCPU = 1024
	minShares    = 2
	maxShares    = 262144
	minQuota     = 1000
	maxPods      = 110
)

// Limits are cgroup settings: a container's, or a pod's parent cgroup bounding all its
// containers together. Zero MemoryBytes or CPUQuota leave that resource unbounded.
type Limits struct {
	MemoryBytes int64
	CPUQuota    int64
	CPUPeriod   uint64
	CPUShares   uint64
}

// limitsFor maps a container's requests/limits to cgroup settings: memory
// limit, CFS quota from the CPU limit, shares from the CPU request (or the
// limit when no request is given, as API defaulting would).
func limitsFor(res corev1.ResourceRequirements) Limits {
	var l Limits
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
		l.CPUShares = sharesFor(req.MilliValue())
	}
	if hasLim && lim.MilliValue() > 0 {
		l.CPUPeriod = cpuPeriod
		l.CPUQuota = quotaFor(lim.MilliValue())
	}
	return l
}

func sharesFor(milliCPU int64) uint64 {
	return uint64(min(max(milliCPU*sharesPerCPU/1000, minShares), maxShares))
}

func quotaFor(milliCPU int64) int64 {
	return max(milliCPU*cpuPeriod/1000, minQuota)
}

// PodResourcesFor derives a pod's cgroup settings as Kubernetes' pod container manager does
// (ResourceConfigForPod): shares from the effective pod CPU request, a CFS quota and a memory
// limit from the effective pod limits, each only when every container (init ones included)
// or the pod-level resources declare that limit; otherwise one unbounded container could use
// more than a sum that left it out. "Effective" is kube's own arithmetic: the larger of any
// init container and the app containers plus the sidecars started before it, plus overhead.
func PodResourcesFor(pod *corev1.Pod) Limits {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	lims := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	r := Limits{CPUShares: sharesFor(reqs.Cpu().MilliValue())}
	if declared(pod, corev1.ResourceCPU) && lims.Cpu().MilliValue() > 0 {
		r.CPUPeriod = cpuPeriod
		r.CPUQuota = quotaFor(lims.Cpu().MilliValue())
	}
	if declared(pod, corev1.ResourceMemory) && lims.Memory().Value() > 0 {
		r.MemoryBytes = lims.Memory().Value()
	}
	return r
}

// declared: the pod bounds the resource as a whole or every one of its containers does.
func declared(pod *corev1.Pod, name corev1.ResourceName) bool {
	if pod.Spec.Resources != nil {
		if q, ok := pod.Spec.Resources.Limits[name]; ok && !q.IsZero() {
			return true
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if q, ok := c.Resources.Limits[name]; !ok || q.IsZero() {
				return false
			}
		}
	}
	return true
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
