package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"go.opentelemetry.io/otel/attribute"
	corev1 "k8s.io/api/core/v1"
)

// ContainerConfig is one container of a pod, with Kubernetes semantics:
// Command replaces the image entrypoint, Args replace its cmd.
type ContainerConfig struct {
	Name       string // required
	Attempt    int    // restart count; each attempt is its own containerd container and log
	Image      string // an imported image name (required)
	Command    []string
	Args       []string
	Env        []string // KEY=VALUE, over the image's env
	WorkingDir string
	Resources  corev1.ResourceRequirements
	Mounts     []Mount
	Security   Security
	// Stdin gives the process a stdin that stays open for attached clients; StdinOnce closes
	// it when the first one leaves; TTY gives it a terminal, whose output is one stream.
	Stdin, StdinOnce, TTY bool
}

// Mount bind-mounts a host path (volumes prepared by the agent).
type Mount struct {
	HostPath      string
	ContainerPath string
	ReadOnly      bool
}

// Container is a started container.
type Container struct {
	ID        string
	PodUID    string
	Name      string
	Attempt   int
	Image     string
	Pid       uint32
	LogPath   string
	StartedAt time.Time
}

// StartContainer creates and starts a container in the sandbox: the pod's
// network namespace, hostname and shared /etc files, cgroup limits from its
// resources, and stdout+stderr appended to LogPath in the CRI log format by this runtime,
// from FIFOs the shim holds (so logging resumes after an agent restart). Starting an attempt that is already running
// returns it.
func (r *Runtime) StartContainer(ctx context.Context, sb *Sandbox, c ContainerConfig) (*Container, error) {
	if c.Name == "" || c.Image == "" {
		return nil, errors.New("runtime: ContainerConfig needs Name and Image")
	}
	ctx = r.ctx(ctx)
	id := containerID(sb.PodUID, c.Name, c.Attempt)
	defer r.locks.lock("ctr/" + id)()

	if existing, err := r.client.LoadContainer(ctx, id); err == nil {
		return r.adoptRunning(ctx, existing)
	} else if !errdefs.IsNotFound(err) {
		return nil, err
	}

	ref, err := NormalizeImage(c.Image)
	if err != nil {
		return nil, err
	}
	img, err := r.client.GetImage(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", c.Image, err)
	}
	logPath := r.LogPath(sb.PodUID, c.Name, c.Attempt)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	cgroup := r.cgroupPath(sb.PodUID, id)
	labels := map[string]string{
		labelRole: roleContainer, labelPodUID: sb.PodUID, labelPodName: sb.PodName, labelPodNS: sb.PodNamespace,
		labelSandboxID: sb.ID, labelName: c.Name, labelAttempt: strconv.Itoa(c.Attempt),
		labelLogPath: logPath, labelCgroup: cgroup,
	}
	switch {
	case c.Stdin && c.StdinOnce:
		labels[labelStdin] = "once"
	case c.Stdin:
		labels[labelStdin] = "open"
	}
	if c.TTY {
		labels[labelTTY] = "true"
	}
	specOpts, err := containerSpecOpts(ctx, img, sb, c, cgroup)
	if err != nil {
		return nil, err
	}
	// Spec options come after the snapshot: WithImageConfig reads the image.
	cctx, end := op(ctx, "create container", containerAttr(id), attribute.String("container.image.name", c.Image))
	cont, err := r.client.NewContainer(cctx, id,
		containerd.WithImage(img),
		containerd.WithSnapshotter(snapshotter),
		containerd.WithNewSnapshot(id, img),
		containerd.WithContainerLabels(labels),
		containerd.WithNewSpec(specOpts...),
	)
	end(&err)
	if err != nil {
		return nil, fmt.Errorf("create container: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = r.deleteContainer(context.WithoutCancel(ctx), cont)
		}
	}()
	task, err := r.startTask(ctx, cont, sb.PodUID, logPath, c)
	if err != nil {
		return nil, err
	}
	started := time.Now().UTC()
	if _, err := cont.SetLabels(ctx, map[string]string{labelStartedAt: started.Format(time.RFC3339Nano)}); err != nil {
		return nil, err
	}
	ok = true
	return &Container{ID: id, PodUID: sb.PodUID, Name: c.Name, Attempt: c.Attempt, Image: c.Image,
		Pid: task.Pid(), LogPath: logPath, StartedAt: started}, nil
}

func (r *Runtime) startTask(ctx context.Context, cont containerd.Container, podUID, logPath string, c ContainerConfig) (_ containerd.Task, err error) {
	ctx, end := op(ctx, "start container", containerAttr(cont.ID()))
	defer end(&err)
	sio, err := r.openStdio(podUID, cont.ID(), logPath, c.Stdin, c.TTY)
	if err != nil {
		return nil, err
	}
	task, err := cont.NewTask(ctx, sio.creator())
	if err != nil {
		sio.close()
		return nil, fmt.Errorf("create task: %w", err)
	}
	// The shim has its ends now; the copy ends when the shim closes them (deleteTask waits).
	sio.release()
	r.copyLog(cont.ID(), logPath, sio.outputs)
	if sio.stdin != nil {
		r.keepStdin(cont.ID(), &stdinPipe{w: sio.stdin, path: sio.cfg.Stdin, once: c.StdinOnce, tty: c.TTY})
	}
	if err := task.Start(ctx); err != nil {
		return nil, fmt.Errorf("start task: %w", err)
	}
	return task, nil
}

func (r *Runtime) adoptRunning(ctx context.Context, c containerd.Container) (*Container, error) {
	info, err := c.Info(ctx)
	if err != nil {
		return nil, err
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("container %s exists without a task: %w", c.ID(), errdefs.ErrAlreadyExists)
	}
	st, err := task.Status(ctx)
	if err != nil {
		return nil, err
	}
	if st.Status != containerd.Running {
		return nil, fmt.Errorf("container %s already ran (%s): use the next attempt: %w", c.ID(), st.Status, errdefs.ErrAlreadyExists)
	}
	attempt, _ := strconv.Atoi(info.Labels[labelAttempt])
	started, _ := time.Parse(time.RFC3339Nano, info.Labels[labelStartedAt])
	return &Container{ID: c.ID(), PodUID: info.Labels[labelPodUID], Name: info.Labels[labelName], Attempt: attempt,
		Image: info.Image, Pid: task.Pid(), LogPath: info.Labels[labelLogPath], StartedAt: started}, nil
}

func containerSpecOpts(ctx context.Context, img containerd.Image, sb *Sandbox, c ContainerConfig, cgroup string) ([]oci.SpecOpts, error) {
	ispec, err := img.Spec(ctx)
	if err != nil {
		return nil, fmt.Errorf("image %q config: %w", c.Image, err)
	}
	pod := fmt.Sprintf("%s_%s(%s)", sb.PodName, sb.PodNamespace, sb.PodUID) // as the kubelet names a pod
	if err := verifyNonRoot(ispec.Config.User, c.Security, pod, c.Name); err != nil {
		return nil, err
	}
	var opts []oci.SpecOpts
	switch {
	case len(c.Command) > 0:
		opts = append(opts, oci.WithImageConfig(img), oci.WithProcessArgs(append(append([]string{}, c.Command...), c.Args...)...))
	default:
		opts = append(opts, oci.WithImageConfigArgs(img, c.Args))
	}
	if len(c.Env) > 0 {
		opts = append(opts, oci.WithEnv(c.Env))
	}
	if c.WorkingDir != "" {
		opts = append(opts, oci.WithProcessCwd(c.WorkingDir))
	}
	mounts := []specs.Mount{
		bindMount(filepath.Join(sb.Dir, "hosts"), "/etc/hosts", false),
		bindMount(filepath.Join(sb.Dir, "hostname"), "/etc/hostname", false),
		bindMount(filepath.Join(sb.Dir, "resolv.conf"), "/etc/resolv.conf", false),
	}
	for _, m := range c.Mounts {
		mounts = append(mounts, bindMount(m.HostPath, m.ContainerPath, m.ReadOnly))
	}
	opts = append(opts,
		oci.WithHostname(sb.Hostname),
		oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: sb.NetNSPath}),
		oci.WithMounts(mounts),
		oci.WithCgroup(cgroup),
	)
	lim := limitsFor(c.Resources)
	if lim.MemoryBytes > 0 {
		opts = append(opts, oci.WithMemoryLimit(uint64(lim.MemoryBytes)))
	}
	if lim.CPUQuota > 0 {
		opts = append(opts, oci.WithCPUCFS(lim.CPUQuota, lim.CPUPeriod))
	}
	opts = append(opts, oci.WithCPUShares(lim.CPUShares))
	if c.TTY {
		opts = append(opts, oci.WithTTY) // after the env: it adds TERM
	}
	return append(opts, securityOpts(ispec.Config.User, c.Security)...), nil
}

func bindMount(src, dst string, ro bool) specs.Mount {
	mode := "rw"
	if ro {
		mode = "ro"
	}
	return specs.Mount{Type: "bind", Source: src, Destination: dst, Options: []string{"rbind", "rprivate", mode}}
}

// StopContainer sends SIGTERM, waits up to grace, then SIGKILLs, and deletes
// the task, the container and its snapshot. The log file stays (previous
// attempt's logs) until the sandbox goes (StopSandbox, not FinishSandbox). A missing container is not an error.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	return r.withContainer(ctx, id, func(ctx context.Context, c containerd.Container) error {
		if err := r.killTask(ctx, "stop container", c, grace); err != nil {
			return err
		}
		return r.deleteContainer(ctx, c)
	})
}

// KillContainer stops a container's process like StopContainer (SIGTERM, SIGKILL after grace)
// but keeps the container, so its exit code and attempt number stay for status and restart.
// A missing container is not an error.
func (r *Runtime) KillContainer(ctx context.Context, id string, grace time.Duration) error {
	return r.withContainer(ctx, id, func(ctx context.Context, c containerd.Container) error {
		return r.killTask(ctx, "kill container", c, grace)
	})
}

// withContainer runs f on container id under its lock; a missing container is not an error.
func (r *Runtime) withContainer(ctx context.Context, id string, f func(context.Context, containerd.Container) error) error {
	ctx = r.ctx(ctx)
	defer r.locks.lock("ctr/" + id)()
	c, err := r.client.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return f(ctx, c)
}

func (r *Runtime) killTask(ctx context.Context, opName string, c containerd.Container, grace time.Duration) (err error) {
	ctx, end := op(ctx, opName, containerAttr(c.ID()))
	defer end(&err)
	task, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	st, err := task.Status(ctx)
	if err != nil {
		return err
	}
	if st.Status == containerd.Stopped {
		return nil
	}
	exited, err := task.Wait(ctx) // before any kill, or the exit can be missed
	if err != nil {
		return err
	}
	if grace > 0 {
		if err := task.Kill(ctx, syscall.SIGTERM); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("sigterm %s: %w", c.ID(), err)
		}
		select {
		case <-exited:
			return nil
		case <-time.After(grace):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := task.Kill(ctx, syscall.SIGKILL, containerd.WithKillAll); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("sigkill %s: %w", c.ID(), err)
	}
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Runtime) deleteContainer(ctx context.Context, c containerd.Container) (err error) {
	ctx, end := op(ctx, "delete container", containerAttr(c.ID()))
	defer end(&err)
	if err := r.deleteTask(ctx, c); err != nil {
		return err
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete container %s: %w", c.ID(), err)
	}
	return nil
}

// deleteTask removes a container's task (its shim and cgroup go with it); the container stays.
func (r *Runtime) deleteTask(ctx context.Context, c containerd.Container) error {
	r.dropStdin(c.ID())
	task, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := task.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete task %s: %w", c.ID(), err)
	}
	// The shim is gone and its FIFO ends with it: the copy reads what is left, then ends.
	r.drainLog(ctx, c.ID())
	return nil
}
