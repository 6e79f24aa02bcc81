package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/agent"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/netpol"
	"github.com/skiff-sh/skiff/actors/proxy"
	"github.com/skiff-sh/skiff/deploy/images/examples"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/cgrouptest"
	"github.com/skiff-sh/skiff/testkit/echoapp"
	"github.com/skiff-sh/skiff/testkit/needs"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// upNode is `skiff up` as a user runs it: the real binary, control plane and node agent in
// one process, with containerd, runc, CNI and the eBPF Service hooks. It gets a containerd
// namespace and cgroup subtree of its own (cgrouptest's node layout), its hooks attached
// there, so it shares the host with other tests.
type upNode struct {
	t                   *testing.T
	bin, dir, hierarchy string
	name, ns            string
	args                []string
	cmd                 *exec.Cmd
	done                chan struct{}
	logPath             string
	client              *apiclient.Client
	bridgeWasThere      bool
}

func startUp(t *testing.T) *upNode {
	t.Helper()
	if why := agent.Supported(); why != "" {
		needs.Skip(t, why)
	}
	hierarchy := cgrouptest.HostHierarchy()
	if hierarchy == "" {
		needs.Skip(t, "no cgroup2 hierarchy mounted")
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b[:2])
	// Short paths: containerd's socket path must fit in a unix socket address.
	dir, err := os.MkdirTemp("", "skup-")
	if err != nil {
		t.Fatal(err)
	}
	u := &upNode{t: t, bin: testutil.BuildBinary(t, "./services/skiff"), dir: dir, hierarchy: hierarchy,
		name: "up-" + id, ns: "skiff-up-" + id, logPath: filepath.Join(dir, "skiff-up.log")}
	images := filepath.Join(dir, "images")
	if _, err := examples.BuildHTTPEcho(images); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"agent", "client"} {
		if err := os.MkdirAll(filepath.Join(hierarchy, u.ns, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err = net.InterfaceByName("skiff0") // skiff up's default bridge
	u.bridgeWasThere = err == nil
	t.Cleanup(u.destroy)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	// Random private ranges: other tests run beside this one.
	u.args = []string{"up", "--agent", "--api-auth=false", "--nats-port", "0", "--listen", addr,
		"--data-dir", filepath.Join(dir, "data"), "--images-dir", images, "--node-name", u.name,
		"--containerd-namespace", u.ns, "--cgroup-root", filepath.Join(hierarchy, u.ns),
		"--pod-cidr", fmt.Sprintf("10.%d.%d.0/24", 150+int(b[0])%50, b[1]),
		"--service-cidr", fmt.Sprintf("10.%d.%d.0/24", 100+int(b[2])%50, b[1])}
	u.client = &apiclient.Client{T: apiclient.HTTP{Server: "http://" + addr}}
	u.start()
	return u
}

// start runs skiff up in the node's cgroup (containerd and the shims inherit it) and waits
// until it says it is up.
func (u *upNode) start() time.Duration {
	t := u.t
	t.Helper()
	cg, err := os.Open(filepath.Join(u.hierarchy, u.ns, "agent"))
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	logf, err := os.OpenFile(u.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	from, _ := os.Stat(u.logPath)
	u.cmd = exec.Command(u.bin, u.args...)
	u.cmd.Stdout, u.cmd.Stderr = logf, logf
	u.cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd()), Setpgid: true}
	start := time.Now()
	if err := u.cmd.Start(); err != nil {
		t.Fatalf("start skiff up: %v", err)
	}
	u.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(u.cmd, u.done)
	testutil.Eventually(t, 90*time.Second, 20*time.Millisecond, func() error {
		select {
		case <-u.done:
			t.Fatalf("skiff up exited:\n%s", u.logTail(40))
		default:
		}
		b, _ := os.ReadFile(u.logPath)
		if !strings.Contains(string(b[from.Size():]), "skiff is up in") {
			return fmt.Errorf("skiff up not up yet")
		}
		return nil
	})
	return time.Since(start)
}

// stop is a user's ^C: SIGTERM, and the wait for the process to end. Pods keep running.
func (u *upNode) stop() {
	if u.cmd == nil {
		return
	}
	_ = u.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-u.done:
	case <-time.After(30 * time.Second):
		_ = u.cmd.Process.Kill()
		<-u.done
	}
	u.cmd = nil
}

func (u *upNode) logTail(lines int) string {
	b, _ := os.ReadFile(u.logPath)
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

// destroy removes what the node made on the host: its processes and pods, mounts, pins,
// cgroups, and the bridge if this test made it.
func (u *upNode) destroy() {
	if u.t.Failed() {
		u.t.Logf("skiff up log:\n%s", u.logTail(60))
	}
	u.stop()
	cgrouptest.Teardown(u.t, u.hierarchy, u.ns, u.dir, proxy.DefaultPinDir(u.name), netpol.DefaultPinDir(u.name))
	if !u.bridgeWasThere {
		_ = exec.Command("ip", "link", "delete", "skiff0").Run()
	}
	_ = os.RemoveAll(u.dir)
}

func (u *upNode) clusterIP(name string) string {
	u.t.Helper()
	k, _ := schemas.ByResource("", "v1", "services")
	o, err := u.client.Get(context.Background(), k, "default", name)
	if err != nil {
		u.t.Fatal(err)
	}
	return o.(*corev1.Service).Spec.ClusterIP
}

// A client in the node's cgroup opens a new connection to a ClusterIP 50 times a second while
// `skiff up` is restarted three times: the pinned maps keep serving while no process runs,
// and the restarted proxy changes nothing a connect() sees, so no connection is refused (it
// once shrank the maps before its Service index had caught up with its informers).
func TestUpRestartRefusesNoClusterIPConnection(t *testing.T) {
	u := startUp(t)
	createAll(t, u.client, echoapp.App{Name: "web"}.Manifest())
	waitReadyPods(t, u.client, "app=web", 2)
	vip := u.clusterIP("web")
	load := cgrouptest.StartClient[loadReq, loadResp](t, filepath.Join(u.hierarchy, u.ns, "client"), loadClientEnv, false)
	t.Cleanup(func() { load.Do(loadReq{Op: "stop"}) }) // before the client's own cleanup ends it
	do := func(r loadReq) loadResp {
		t.Helper()
		resp := load.Do(r)
		if resp.Err != "" {
			t.Fatalf("load client: %s", resp.Err)
		}
		return resp
	}
	// oks waits until the load has had n more answers than it had at from.
	oks := func(from loadResp, n int) loadResp {
		t.Helper()
		var c loadResp
		testutil.Eventually(t, 60*time.Second, 20*time.Millisecond, func() error {
			if c = do(loadReq{Op: "count"}); c.OK < from.OK+n {
				return fmt.Errorf("%d answers from %s, want %d", c.OK-from.OK, vip, n)
			}
			return nil
		})
		return c
	}
	c := oks(do(loadReq{Op: "start", URL: "http://" + vip + "/", Rate: 50}), 50)
	for i := range 3 {
		before := c
		u.stop()
		took := u.start()
		// The restarted proxy resyncs within its first second; two seconds of answers cover it.
		c = oks(do(loadReq{Op: "count"}), 100)
		t.Logf("restart %d: skiff up back in %v; %d answered, %d refused, %d failed meanwhile",
			i+1, took.Round(time.Millisecond), c.OK-before.OK, c.Refused-before.Refused, c.Failed-before.Failed)
	}
	c = do(loadReq{Op: "stop"})
	t.Logf("across 3 restarts of skiff up at 50 connections/s to %s: %d answered, %d refused, %d failed", vip, c.OK, c.Refused, c.Failed)
	if c.Refused > 0 || c.Failed > 0 {
		t.Fatalf("%d connections refused, %d failed; first: %v", c.Refused, c.Failed, c.Failures)
	}
}
