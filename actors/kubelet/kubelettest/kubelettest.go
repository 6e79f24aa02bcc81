// Package kubelettest sets up a real node for tests and benchmarks of the kubelet: a
// containerd daemon of its own, a runtime in a fresh containerd namespace with its own CNI
// bridge and pod CIDR, and the httpecho image built and imported (no registry).
package kubelettest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"time"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/internal/ocibuild"
	"github.com/skiff-sh/skiff/testkit/shimreap"
)

// Image is the name the httpecho image is imported under.
const Image = "skiff.local/httpecho:test"

// SkipReason says why this machine cannot run a node ("" when it can).
func SkipReason() string {
	if os.Geteuid() != 0 {
		return "needs root (network namespaces, containerd, runc)"
	}
	for _, bin := range []string{"containerd", "containerd-shim-runc-v2", "runc", "go", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " not in PATH (run .ci/deps/node.sh)"
		}
	}
	for _, p := range kruntime.CNIPlugins {
		if _, err := os.Stat(filepath.Join("/opt/cni/bin", p)); err != nil {
			return "CNI plugin " + p + " missing (run .ci/deps/node.sh)"
		}
	}
	return ""
}

// Node is a started containerd with one runtime on it.
type Node struct {
	Root    string
	Daemon  *kruntime.Daemon
	Runtime *kruntime.Runtime
	Options kruntime.Options
}

// StartNode starts containerd under a new temp dir, opens a runtime and imports the image.
func StartNode(ctx context.Context) (n *Node, err error) {
	n = &Node{}
	started := n // what to clean up: the returns below set n to nil
	defer func() {
		if err != nil {
			started.Close()
		}
	}()
	// A short root keeps the socket path within the unix limit.
	if n.Root, err = os.MkdirTemp("", "skkl"); err != nil {
		return nil, err
	}
	images := filepath.Join(n.Root, "images")
	if err := BuildImage(images); err != nil {
		return nil, err
	}
	if n.Daemon, err = kruntime.StartContainerd(ctx, n.Root); err != nil {
		return nil, err
	}
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	suffix := hex.EncodeToString(b)
	n.Options = kruntime.Options{
		Socket:    n.Daemon.Socket,
		Namespace: "skiffkl-" + suffix,
		Root:      filepath.Join(n.Root, "node"),
		Bridge:    "skk" + suffix,
		PodCIDR:   fmt.Sprintf("10.214.%d.0/24", 1+int(b[0])%200),
	}
	if n.Runtime, err = kruntime.New(ctx, n.Options); err != nil {
		return nil, err
	}
	return n, n.Runtime.ImportDir(ctx, images)
}

// NewRuntime opens a second runtime on the same containerd, namespace and files: what a
// restarted agent process gets.
func (n *Node) NewRuntime(ctx context.Context) (*kruntime.Runtime, error) {
	return kruntime.New(ctx, n.Options)
}

// Close removes every pod, the bridge, the daemon and the temp dir.
func (n *Node) Close() {
	ctx := context.Background()
	if n.Runtime != nil {
		if pods, err := n.Runtime.List(ctx); err == nil {
			for _, p := range pods {
				_ = n.Runtime.StopSandbox(ctx, p.PodUID)
			}
		}
		_ = n.Runtime.Close()
		_ = exec.Command("ip", "link", "del", n.Options.Bridge).Run()
	}
	n.reap()
	if n.Root != "" {
		_ = os.RemoveAll(n.Root)
	}
}

// reap kills what the sweep of Close missed (a pod a test's kubelet was still starting as it
// listed them): its containers through the namespace's cgroups, and, once containerd is
// stopped, its shim, which outlives containerd: the node must not outlive the test binary.
func (n *Node) reap() {
	if n.Runtime != nil {
		removeCgroups(n.Options.Namespace)
	}
	if n.Daemon != nil {
		_ = n.Daemon.Stop()
		shimreap.Kill(n.Daemon.Socket)
	}
}

// BuildImage compiles httpecho statically and writes it as an OCI tarball into dir.
func BuildImage(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(dir, "httpecho")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/skiff-sh/skiff/deploy/images/httpecho")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	// Inside the module, wherever the caller runs from.
	if _, file, _, ok := goruntime.Caller(0); ok {
		if root := filepath.Join(filepath.Dir(file), "..", "..", ".."); fileExists(filepath.Join(root, "go.mod")) {
			cmd.Dir = root
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build httpecho: %v\n%s", err, out)
	}
	_, err := ocibuild.WriteFile(filepath.Join(dir, "httpecho.tar"), ocibuild.Image{
		Name:       Image,
		Files:      []ocibuild.File{{Src: bin, Dst: "/httpecho", Mode: 0o755}},
		Dirs:       []string{"/tmp"},
		Entrypoint: []string{"/httpecho"},
		Env:        []string{"PORT=8080"},
	})
	return err
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// removeCgroups kills what is left in the namespace's cgroups and drops their directories,
// v1 and v2 layouts, waiting a little for the killed to exit.
func removeCgroups(namespace string) {
	for try := 0; kruntime.RemoveCgroupTree("/"+namespace) != nil && try < 20; try++ {
		time.Sleep(50 * time.Millisecond) // the killed exiting
	}
}
