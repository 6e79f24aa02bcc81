package kubelettest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/testkit/needs"
	"github.com/skiff-sh/skiff/testkit/shimreap"
)

// A pod the sweep of Close does not stop (a kubelet was still starting it) is killed anyway:
// its container through the namespace's cgroups, its shim by the containerd socket it names.
func TestCloseKillsWhatTheSweepMissed(t *testing.T) {
	if r := SkipReason(); r != "" {
		needs.Skip(t, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n, err := StartNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	sb, err := n.Runtime.RunSandbox(ctx, kruntime.SandboxConfig{PodUID: "missed", PodName: "missed", PodNamespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	ctr, err := n.Runtime.StartContainer(ctx, sb, kruntime.ContainerConfig{Name: "web", Image: Image})
	if err != nil {
		t.Fatal(err)
	}
	shims := shimreap.PIDs(n.Daemon.Socket)
	if len(shims) == 0 || !alive(int(ctr.Pid)) {
		t.Fatalf("before: shims %v, container %d alive %v", shims, ctr.Pid, alive(int(ctr.Pid)))
	}
	n.reap() // what Close does past its sweep
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && (alive(int(ctr.Pid)) || slices.ContainsFunc(shims, alive)) {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(int(ctr.Pid)) || slices.ContainsFunc(shims, alive) {
		t.Fatalf("left running: container %d %v, shims %v", ctr.Pid, alive(int(ctr.Pid)), shims)
	}
}

// alive: pid exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the command in parentheses: "pid (comm) S ...".
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}
