package netnscluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/netpol"
	"github.com/skiff-sh/skiff/actors/proxy"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/cgrouptest"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// Node is one netns host running a `skiff agent` process.
type Node struct {
	c         *Cluster
	Index     int
	Name      string
	Netns     string // name under /run/netns
	IP        string // InternalIP
	PodCIDR   string
	Namespace string // containerd namespace, and the name of the node's cgroup2 subtree
	Cgroup    string // the node's cgroup2 subtree (the agent's --cgroup-root)
	DataDir   string
	hostVeth  string
	cmd       *exec.Cmd
	done      chan struct{}
}

// wire makes the node's netns and its veth into the host bridge.
func (n *Node) wire() error {
	steps := [][]string{
		{"netns", "add", n.Netns},
		{"link", "add", n.hostVeth, "type", "veth", "peer", "name", "eth0", "netns", n.Netns},
		{"link", "set", n.hostVeth, "master", n.c.Bridge, "up"},
		{"-n", n.Netns, "addr", "add", n.IP + "/24", "dev", "eth0"},
		{"-n", n.Netns, "link", "set", "eth0", "up"},
		{"-n", n.Netns, "link", "set", "lo", "up"},
		{"-n", n.Netns, "route", "add", "default", "via", n.c.HostIP},
	}
	for _, s := range steps {
		if err := run("ip", s...); err != nil {
			return err
		}
	}
	for _, d := range []string{n.DataDir, filepath.Join(n.Cgroup, "agent")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// Start runs the agent in the node's netns, placed into its cgroup2 subtree at clone time so
// containerd, the shims and the pods inherit it.
func (n *Node) Start() {
	t := n.c.t
	t.Helper()
	cg, err := os.Open(filepath.Join(n.Cgroup, "agent"))
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	logf, err := os.OpenFile(n.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("nsenter", "--net=/run/netns/"+n.Netns, "--", n.c.skiff, "agent",
		"--node-name", n.Name, "--node-ip", n.IP, "--pod-cidr", n.PodCIDR, "--nats-url", n.c.NATSURL(),
		"--data-dir", n.DataDir, "--images-dir", n.c.images, "--containerd-namespace", n.Namespace,
		"--cgroup-root", n.Cgroup, "--node-lease-renew-interval", n.c.opts.LeaseRenew.String(), "--route-pod-cidrs")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd()), Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start agent %s: %v", n.Name, err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(n.done)
}

// LogPath is the agent's stdout+stderr.
func (n *Node) LogPath() string { return filepath.Join(n.DataDir, "agent.log") }

// LogTail is the end of the agent's log, for failure messages.
func (n *Node) LogTail(lines int) string {
	b, _ := os.ReadFile(n.LogPath())
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// Stop ends the agent with SIGTERM and waits; containerd stops with it, pods keep running.
func (n *Node) Stop() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
	n.cmd = nil
}

// Kill is a crashed node agent: SIGKILL to the agent and its containerd. The shims and pods
// are left running, as they are when only the agent's processes die.
func (n *Node) Kill() {
	if n.cmd == nil {
		return
	}
	for _, pid := range cgrouptest.Procs(filepath.Join(n.Cgroup, "agent")) {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "containerd" {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_ = n.cmd.Process.Kill()
	<-n.done
	n.cmd = nil
}

// Partition cuts the node off the network (its veth's host end down); Heal undoes it.
func (n *Node) Partition() error { return run("ip", "link", "set", n.hostVeth, "down") }

// Heal reconnects a partitioned node.
func (n *Node) Heal() error { return run("ip", "link", "set", n.hostVeth, "up") }

// WaitReady waits until the Node's Ready condition is want.
func (n *Node) WaitReady(want bool, within time.Duration) {
	t := n.c.t
	t.Helper()
	k, _ := schemas.ByResource("", "v1", "nodes")
	testutil.Eventually(t, within, 100*time.Millisecond, func() error {
		if n.cmd != nil {
			select {
			case <-n.done:
				t.Fatalf("agent %s exited; log:\n%s", n.Name, n.LogTail(30))
			default:
			}
		}
		o, err := n.c.CP.Client.Get(context.Background(), k, "", n.Name)
		if err != nil {
			return err
		}
		if got := controllerkit.IsNodeReady(o.(*corev1.Node)); got != want {
			return fmt.Errorf("node %s ready=%v, want %v", n.Name, got, want)
		}
		return nil
	})
}

// WaitRenewed waits until the node's agent renews its Lease after since: proof that a
// (re)started agent is up, where a Ready condition may still be the previous agent's.
func (n *Node) WaitRenewed(since time.Time, within time.Duration) {
	t := n.c.t
	t.Helper()
	k, _ := schemas.ByResource("coordination.k8s.io", "v1", "leases")
	testutil.Eventually(t, within, 100*time.Millisecond, func() error {
		o, err := n.c.CP.Client.Get(context.Background(), k, corev1.NamespaceNodeLease, n.Name)
		if err != nil {
			return err
		}
		if r := o.(*coordv1.Lease).Spec.RenewTime; r == nil || !r.After(since) {
			return fmt.Errorf("lease of %s last renewed %v, before %v", n.Name, r, since)
		}
		return nil
	})
}

// Container is one pod container running on a node, as its containerd reports it.
type Container struct {
	ID, PodUID, PodName string
	Pid                 uint32
}

// Running lists the node's running pod containers by asking its containerd directly (the
// agent may be dead). A node whose containerd is down has none it could report.
func (n *Node) Running(ctx context.Context) ([]Container, error) {
	sock := filepath.Join(n.DataDir, "node", "containerd", "containerd.sock")
	cl, err := containerd.New(sock, containerd.WithDefaultNamespace(n.Namespace), containerd.WithTimeout(2*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	cs, err := cl.Containers(ctx, `labels."skiff.sh/role"==container`)
	if err != nil {
		return nil, err
	}
	var out []Container
	for _, c := range cs {
		task, err := c.Task(ctx, nil)
		if err != nil {
			continue // created, not started, or already deleted
		}
		st, err := task.Status(ctx)
		if err != nil || st.Status != containerd.Running {
			continue
		}
		l, err := c.Labels(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, Container{ID: c.ID(), PodUID: l["skiff.sh/pod-uid"], PodName: l["skiff.sh/pod-name"], Pid: task.Pid()})
	}
	return out, nil
}

// CgroupOf is a process's path in the cgroup2 hierarchy ("0::" line of /proc/pid/cgroup).
func CgroupOf(pid uint32) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("process %d is in no cgroup2 group", pid)
}

// destroy removes everything the node made: every process of its subtree (agent, containerd,
// shims, pods), the mounts under its data dir (rootfs, pinned pod netns), its Service hook
// pins, its cgroups in every hierarchy, and its netns (the veth goes with it).
func (n *Node) destroy() {
	t := n.c.t
	if n.cmd != nil {
		_ = n.cmd.Process.Kill()
		<-n.done
		n.cmd = nil
	}
	cgrouptest.Teardown(t, n.c.cgroup2, n.Namespace, n.DataDir, proxy.DefaultPinDir(n.Name), netpol.DefaultPinDir(n.Name))
	_ = run("ip", "netns", "delete", n.Netns)
	_ = run("ip", "link", "delete", n.hostVeth)
}
