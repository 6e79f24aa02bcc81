package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

const cgroupRoot = "/sys/fs/cgroup"

// cgroupPath nests each container under a per-pod parent in the runtime's
// namespace, so a pod's cgroups can be found and removed together.
func (r *Runtime) cgroupPath(podUID, id string) string {
	return r.PodCgroup(podUID) + "/" + id
}

// PodCgroup is the pod's parent cgroup, relative to each hierarchy's mount (v1) or to the
// unified mount (v2).
func (r *Runtime) PodCgroup(podUID string) string {
	return "/" + r.o.Namespace + "/pod" + shortHash(podUID)
}

// ensurePodCgroup creates (or updates) the pod's parent cgroup with the pod's limits before
// any container goes in, as kubelet's pod container manager does: runc then nests each
// container below it, so the sum is enforced over all of them.
func (r *Runtime) ensurePodCgroup(podUID string, l Limits) error {
	shares := max(l.CPUShares, minShares)
	res := &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: &shares}}
	if l.CPUQuota > 0 {
		res.CPU.Quota, res.CPU.Period = &l.CPUQuota, &l.CPUPeriod
	}
	if l.MemoryBytes > 0 {
		res.Memory = &specs.LinuxMemory{Limit: &l.MemoryBytes}
	}
	path := r.PodCgroup(podUID)
	if r.cgroupV2 {
		_, err := cgroup2.NewManager(cgroupRoot, path, cgroup2.ToResources(res))
		return err
	}
	_, err := cgroup1.New(cgroup1.StaticPath(path), res)
	return err
}

// oomKilled reads the kernel's OOM-kill counter of a container's memory
// cgroup (cgroup v2 memory.events, v1 memory.oom_control). The cgroup lives
// until the task is deleted, so an exited container can still be asked.
func (r *Runtime) oomKilled(cgroup string) bool {
	if cgroup == "" {
		return false
	}
	file := filepath.Join(cgroupRoot, "memory", cgroup, "memory.oom_control")
	if r.cgroupV2 {
		file = filepath.Join(cgroupRoot, cgroup, "memory.events")
	}
	n, err := readCounter(file, "oom_kill")
	return err == nil && n > 0
}

func readCounter(file, key string) (int64, error) {
	v, err := ReadStatKey(file, key)
	return int64(v), err
}

// removePodCgroups removes the pod's parent cgroup (runc removes only the
// container leaves) in every hierarchy: the unified one, or each v1
// controller mount.
func (r *Runtime) removePodCgroups(podUID string) error {
	return r.removeCgroupTree("/" + r.o.Namespace + "/pod" + shortHash(podUID))
}

func (r *Runtime) removeCgroupTree(rel string) error {
	if r.cgroupV2 {
		return removeTrees([]string{cgroupRoot}, rel)
	}
	return removeTrees(v1Mounts(), rel)
}

// RemoveCgroupTree kills what is left in the cgroup rel and removes it from whichever layout
// holds it (the unified hierarchy, or every v1 controller's mount), for a sweep that has no
// Runtime to know the layout: a test harness cleaning up after its nodes.
func RemoveCgroupTree(rel string) error {
	return removeTrees(append(v1Mounts(), cgroupRoot), rel)
}

// v1Mounts are the directories under the cgroup root: each v1 controller's mount.
func v1Mounts() []string {
	entries, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return nil // no cgroupfs: nothing was created
	}
	var roots []string
	for _, e := range entries {
		if e.IsDir() {
			roots = append(roots, filepath.Join(cgroupRoot, e.Name()))
		}
	}
	return roots
}

func removeTrees(roots []string, rel string) error {
	var errs []error
	for _, root := range roots {
		if err := rmdirTree(filepath.Join(root, rel)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killCgroupProcs kills every process in one cgroup directory.
func killCgroupProcs(dir string) {
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(procs)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// rmdirTree removes a cgroup directory bottom-up (cgroupfs allows only
// rmdir of empty groups, never unlink of their files). A process still in
// a group is killed first, as the kubelet kills what is left in a pod's
// cgroup before destroying it (a container that started while its pod was
// torn down would keep the group busy); the group goes once it has exited,
// on this call or the next.
func rmdirTree(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		killCgroupProcs(d)
	}
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
