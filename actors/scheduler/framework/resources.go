package framework

import (
	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/schemas/podspec"
)

// Defaults kube-scheduler assumes for a container that requests nothing, so that scoring still
// spreads best-effort pods instead of piling them onto one node. Filtering never uses them.
const (
	defaultMilliCPU = 100
	defaultMemory   = 200 << 20
)

// Resource is an amount of the resources the scheduler accounts for.
type Resource struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	// Scalar holds extended resources (e.g. example.com/gpu, hugepages-2Mi) by name.
	Scalar map[v1.ResourceName]int64
}

func (r *Resource) add(o *Resource) {
	r.MilliCPU += o.MilliCPU
	r.Memory += o.Memory
	r.EphemeralStorage += o.EphemeralStorage
	for k, v := range o.Scalar {
		r.setScalar(k, r.Scalar[k]+v)
	}
}

func (r *Resource) sub(o *Resource) {
	r.MilliCPU -= o.MilliCPU
	r.Memory -= o.Memory
	r.EphemeralStorage -= o.EphemeralStorage
	for k, v := range o.Scalar {
		r.setScalar(k, r.Scalar[k]-v)
	}
}

// setMax raises each amount of r to at least that of o.
func (r *Resource) setMax(o *Resource) {
	r.MilliCPU = max(r.MilliCPU, o.MilliCPU)
	r.Memory = max(r.Memory, o.Memory)
	r.EphemeralStorage = max(r.EphemeralStorage, o.EphemeralStorage)
	for k, v := range o.Scalar {
		if v > r.Scalar[k] {
			r.setScalar(k, v)
		}
	}
}

func (r *Resource) setScalar(k v1.ResourceName, v int64) {
	if r.Scalar == nil {
		r.Scalar = map[v1.ResourceName]int64{}
	}
	r.Scalar[k] = v
}

func (r Resource) clone() Resource {
	if r.Scalar != nil {
		s := make(map[v1.ResourceName]int64, len(r.Scalar))
		for k, v := range r.Scalar {
			s[k] = v
		}
		r.Scalar = s
	}
	return r
}

// resourceFromList converts a ResourceList; pods is ignored (the pod count is accounted apart).
func resourceFromList(rl v1.ResourceList) Resource {
	var r Resource
	for name, q := range rl {
		switch name {
		case v1.ResourceCPU:
			r.MilliCPU = q.MilliValue()
		case v1.ResourceMemory:
			r.Memory = q.Value()
		case v1.ResourceEphemeralStorage:
			r.EphemeralStorage = q.Value()
		case v1.ResourcePods:
		default:
			if isScalar(name) {
				r.setScalar(name, q.Value())
			}
		}
	}
	return r
}

// isScalar: extended resources are namespaced names (vendor/name) or hugepages; other
// unprefixed names such as "storage" are not node capacity the scheduler accounts for.
func isScalar(name v1.ResourceName) bool {
	s := string(name)
	if len(s) > 10 && s[:10] == "hugepages-" {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i] != "kubernetes.io" && s[:i] != "requests.kubernetes.io"
		}
	}
	return false
}

// podRequests returns what a pod occupies on a node, the Kubernetes way: the larger of the
// sum of its app containers (plus sidecars) and the peak of its init phase, plus the pod
// overhead. nonZero is the same with the scoring defaults applied to cpu and memory.
func podRequests(pod *v1.Pod) (req, nonZero Resource) {
	var sidecars, sidecarsNZ Resource
	var initPeak, initPeakNZ Resource
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := resourceFromList(c.Resources.Requests)
		nz := withDefaults(r, c.Resources.Requests)
		if podspec.IsSidecar(c) {
			// A sidecar keeps running beside everything started after it.
			sidecars.add(&r)
			sidecarsNZ.add(&nz)
			peak, peakNZ := sidecars.clone(), sidecarsNZ.clone()
			initPeak.setMax(&peak)
			initPeakNZ.setMax(&peakNZ)
			continue
		}
		r.add(&sidecars)
		nz.add(&sidecarsNZ)
		initPeak.setMax(&r)
		initPeakNZ.setMax(&nz)
	}
	req, nonZero = sidecars.clone(), sidecarsNZ.clone()
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		r := resourceFromList(c.Resources.Requests)
		nz := withDefaults(r, c.Resources.Requests)
		req.add(&r)
		nonZero.add(&nz)
	}
	req.setMax(&initPeak)
	nonZero.setMax(&initPeakNZ)
	if pod.Spec.Overhead != nil {
		o := resourceFromList(pod.Spec.Overhead)
		req.add(&o)
		nonZero.add(&o)
	}
	return req, nonZero
}

func withDefaults(r Resource, rl v1.ResourceList) Resource {
	out := Resource{MilliCPU: r.MilliCPU, Memory: r.Memory}
	if _, ok := rl[v1.ResourceCPU]; !ok {
		out.MilliCPU = defaultMilliCPU
	}
	if _, ok := rl[v1.ResourceMemory]; !ok {
		out.Memory = defaultMemory
	}
	return out
}
