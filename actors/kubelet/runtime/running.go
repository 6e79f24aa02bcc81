package runtime

import "context"

// RunningContainer is a running container attempt and its cgroup, relative to each
// hierarchy's root (the stats sampler reads its usage there).
type RunningContainer struct {
	PodUID, Name, Cgroup string
}

// Running lists the running containers of this runtime's namespace.
func (r *Runtime) Running(ctx context.Context) ([]RunningContainer, error) {
	pods, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []RunningContainer
	for _, p := range pods {
		for _, c := range p.Containers {
			if c.State == StateRunning {
				out = append(out, RunningContainer{PodUID: p.PodUID, Name: c.Name, Cgroup: r.cgroupPath(p.PodUID, c.ID)})
			}
		}
	}
	return out, nil
}

// CgroupV2 reports whether containers live in the unified (v2) hierarchy.
func (r *Runtime) CgroupV2() bool { return r.cgroupV2 }
