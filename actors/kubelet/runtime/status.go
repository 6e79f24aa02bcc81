package runtime

import (
	"context"
	"sort"
	"strconv"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
)

// ContainerState is what containerd says about a container's init process.
type ContainerState string

const (
	StateCreated ContainerState = "Created" // no task (yet, or it failed to start)
	StateRunning ContainerState = "Running"
	StateExited  ContainerState = "Exited"
	StateUnknown ContainerState = "Unknown"
)

// Exit reasons, as the kubelet reports them in ContainerStateTerminated.
const (
	ReasonOOMKilled = "OOMKilled"
	ReasonError     = "Error"
	ReasonCompleted = "Completed"
)

// SandboxStatus is one pod as found in containerd. Containers whose sandbox
// record is gone are listed under a SandboxStatus with an empty ID.
type SandboxStatus struct {
	Sandbox
	Ready      bool // the network namespace is in place
	Finished   bool // FinishSandbox ran: no network, containers kept exited for their logs
	Containers []ContainerStatus
}

// ContainerStatus is one container attempt.
type ContainerStatus struct {
	ID         string
	Name       string
	Attempt    int
	Image      string
	State      ContainerState
	Pid        uint32
	ExitCode   int
	Reason     string // for Exited: OOMKilled, Error or Completed
	StartedAt  time.Time
	FinishedAt time.Time
	LogPath    string
	// As created: a stdin for attached clients (StdinOnce: until the first leaves), a terminal.
	Stdin, StdinOnce, TTY bool
}

// List returns every sandbox and container of this runtime's namespace,
// read back from containerd labels and task state: what an agent needs to
// adopt its pods after a restart.
func (r *Runtime) List(ctx context.Context) (_ []SandboxStatus, err error) {
	ctx, end := op(r.ctx(ctx), "list")
	defer end(&err)
	all, err := r.client.Containers(ctx, `labels."`+labelRole+`"`)
	if err != nil {
		return nil, err
	}
	pods := map[string]*SandboxStatus{}
	get := func(uid string) *SandboxStatus {
		if pods[uid] == nil {
			pods[uid] = &SandboxStatus{Sandbox: Sandbox{PodUID: uid}}
		}
		return pods[uid]
	}
	for _, c := range all {
		info, err := c.Info(ctx, containerd.WithoutRefreshedMetadata)
		if err != nil {
			continue
		}
		uid := info.Labels[labelPodUID]
		switch info.Labels[labelRole] {
		case roleSandbox:
			p := get(uid)
			p.Sandbox = *sandboxFromLabels(c.ID(), info.Labels, r.podDir(uid))
			p.CreatedAt = info.CreatedAt
			p.Ready = p.IP != "" && isNetNS(p.NetNSPath)
			p.Finished = info.Labels[labelFinished] == "true"
		case roleContainer:
			p := get(uid)
			p.Containers = append(p.Containers, r.containerStatus(ctx, c, info.Labels, info.Image))
		}
	}
	out := make([]SandboxStatus, 0, len(pods))
	for _, p := range pods {
		sort.Slice(p.Containers, func(i, j int) bool {
			a, b := p.Containers[i], p.Containers[j]
			if a.Name != b.Name {
				return a.Name < b.Name
			}
			return a.Attempt < b.Attempt
		})
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PodUID < out[j].PodUID })
	return out, nil
}

func (r *Runtime) containerStatus(ctx context.Context, c containerd.Container, labels map[string]string, image string) ContainerStatus {
	cs := ContainerStatus{ID: c.ID(), Name: labels[labelName], Image: image, LogPath: labels[labelLogPath], State: StateUnknown}
	cs.Attempt, _ = strconv.Atoi(labels[labelAttempt])
	cs.Stdin, cs.StdinOnce, cs.TTY = labels[labelStdin] != "", labels[labelStdin] == "once", labels[labelTTY] == "true"
	cs.StartedAt, _ = time.Parse(time.RFC3339Nano, labels[labelStartedAt])
	task, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		cs.State = StateCreated
		return cs
	}
	if err != nil {
		return cs
	}
	st, err := task.Status(ctx)
	if err != nil {
		return cs
	}
	cs.Pid = task.Pid()
	switch st.Status {
	case containerd.Running, containerd.Paused, containerd.Pausing:
		cs.State = StateRunning
	case containerd.Created:
		cs.State = StateCreated
	case containerd.Stopped:
		cs.State = StateExited
		cs.ExitCode = int(st.ExitStatus)
		cs.FinishedAt = st.ExitTime
		cs.Reason = r.exitReason(labels, cs.ExitCode)
	}
	return cs
}

// exitReason: the cgroup's OOM-kill counter (or an OOM event recorded in a
// label) wins over the exit code, since an OOM kill is just a SIGKILL.
func (r *Runtime) exitReason(labels map[string]string, code int) string {
	switch {
	case labels[labelOOM] == "true" || r.oomKilled(labels[labelCgroup]):
		return ReasonOOMKilled
	case code == 0:
		return ReasonCompleted
	default:
		return ReasonError
	}
}

// IsRunning says whether container id's process runs: one container asked, not a list.
func (r *Runtime) IsRunning(ctx context.Context, id string) bool {
	ctx = r.ctx(ctx)
	task, err := r.loadTask(ctx, id)
	if err != nil {
		return false
	}
	st, err := task.Status(ctx)
	return err == nil && st.Status == containerd.Running
}
