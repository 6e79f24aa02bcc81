package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/skiff-sh/skiff/testkit/needs"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/errdefs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/skiff-sh/skiff/internal/ocibuild"
	"github.com/skiff-sh/skiff/testkit/nodebintest"
)

const testImage = "skiff.local/httpecho:test"

// fixture is one containerd per test binary (starting it and importing the
// image is most of the cost); each test makes its own pods.
type fixture struct {
	root   string
	daemon *Daemon
	rt     *Runtime
	opts   Options
	skip   string
	err    error
	timing []string // setup phases, logged by the first test
}

var (
	fx     fixture
	fxOnce sync.Once
)

func TestMain(m *testing.M) {
	code := m.Run()
	fx.teardown()
	os.Exit(code)
}

func env(t *testing.T) *fixture {
	t.Helper()
	fxOnce.Do(fx.setup)
	if fx.skip != "" {
		needs.Skip(t, fx.skip)
	}
	if fx.err != nil {
		t.Fatal(fx.err)
	}
	if fx.timing != nil {
		t.Logf("fixture setup: %s", strings.Join(fx.timing, ", "))
		fx.timing = nil
	}
	return &fx
}

func (f *fixture) setup() {
	if os.Geteuid() != 0 {
		f.skip = "needs root (network namespaces, containerd, runc)"
		return
	}
	// containerd, its shim and the CNI plugins are a skiff binary's entries (nodebintest).
	for _, bin := range []string{"runc", "go"} {
		if _, err := exec.LookPath(bin); err != nil {
			f.skip = bin + " not in PATH (apt-get install -y runc; Go)"
			return
		}
	}
	ctx := context.Background()
	// A short root keeps the socket path within the unix limit.
	if f.root, f.err = os.MkdirTemp("", "skrt"); f.err != nil {
		return
	}
	phase := time.Now()
	mark := func(name string) {
		f.timing = append(f.timing, fmt.Sprintf("%s %s", name, time.Since(phase).Round(time.Millisecond)))
		phase = time.Now()
	}
	if f.err = buildImage(filepath.Join(f.root, "images")); f.err != nil {
		return
	}
	mark("build+ocibuild")
	bin, err := nodebintest.Carry(f.root)
	if f.err = err; err != nil {
		return
	}
	if f.daemon, f.err = StartContainerd(ctx, f.root); f.err != nil {
		return
	}
	mark("containerd start")
	suffix := randHex(2)
	f.opts = Options{
		Socket:    f.daemon.Socket,
		Namespace: "skifftest-" + suffix,
		Root:      filepath.Join(f.root, "node"),
		Bridge:    "skt" + suffix,
		PodCIDR:   fmt.Sprintf("10.213.%d.0/24", 1+int(hexValue(suffix))%250),
		CNIBinDir: bin,
	}
	if f.rt, f.err = New(ctx, f.opts); f.err != nil {
		return
	}
	f.err = f.rt.ImportDir(ctx, filepath.Join(f.root, "images"))
	mark("import+unpack")
}

func (f *fixture) teardown() {
	if f.rt != nil {
		ctx := context.Background()
		if pods, err := f.rt.List(ctx); err == nil {
			for _, p := range pods {
				_ = f.rt.StopSandbox(ctx, p.PodUID)
			}
		}
		_ = f.rt.removeCgroupTree("/" + f.opts.Namespace)
		_ = f.rt.Close()
		_ = exec.Command("ip", "link", "del", f.opts.Bridge).Run()
	}
	if f.daemon != nil {
		_ = f.daemon.Stop()
	}
	if f.root != "" {
		_ = os.RemoveAll(f.root)
	}
}

// buildImage compiles httpecho statically and wraps it with ocibuild: the
// same path the project's own images take, no docker or registry.
func buildImage(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(dir, "httpecho")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/skiff-sh/skiff/deploy/images/httpecho")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build httpecho: %v\n%s", err, out)
	}
	_, err := ocibuild.WriteFile(filepath.Join(dir, "httpecho.tar"), ocibuild.Image{
		Name:       testImage,
		Files:      []ocibuild.File{{Src: bin, Dst: "/httpecho", Mode: 0o755}},
		Dirs:       []string{"/tmp"},
		Entrypoint: []string{"/httpecho"},
		Env:        []string{"PORT=8080"},
	})
	return err
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newPod(t *testing.T, f *fixture, name string) *Sandbox {
	t.Helper()
	sb, err := f.rt.RunSandbox(context.Background(), SandboxConfig{
		PodUID: "uid-" + name + "-" + randHex(4), PodName: name, PodNamespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.rt.StopSandbox(context.Background(), sb.PodUID) })
	return sb
}

func start(t *testing.T, f *fixture, sb *Sandbox, c ContainerConfig) *Container {
	t.Helper()
	if c.Name == "" {
		c.Name = "web"
	}
	c.Image = testImage
	c.Env = append(c.Env, "POD_NAME="+sb.PodName)
	ctr, err := f.rt.StartContainer(context.Background(), sb, c)
	if err != nil {
		t.Fatal(err)
	}
	return ctr
}

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type info struct{ Pod, Hostname, IP string }

func get(url string) (info, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return info{}, err
	}
	defer resp.Body.Close()
	var i info
	if resp.StatusCode != 200 {
		return i, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return i, json.NewDecoder(resp.Body).Decode(&i)
}

func waitServing(t *testing.T, sb *Sandbox) info {
	t.Helper()
	var got info
	eventually(t, 15*time.Second, func() (err error) {
		got, err = get("http://" + sb.IP + ":8080/")
		return err
	})
	return got
}

func waitEvent(t *testing.T, evs <-chan ContainerEvent, id, typ string) ContainerEvent {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				t.Fatal("event stream closed")
			}
			if ev.ContainerID == id && ev.Type == typ {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event for %s", typ, id)
		}
	}
}

func findContainer(t *testing.T, rt *Runtime, id string) (SandboxStatus, ContainerStatus) {
	t.Helper()
	pods, err := rt.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		for _, c := range p.Containers {
			if c.ID == id {
				return p, c
			}
		}
	}
	t.Fatalf("container %s not in List", id)
	return SandboxStatus{}, ContainerStatus{}
}

func bridgePorts(bridge string) []string {
	entries, _ := os.ReadDir(filepath.Join("/sys/class/net", bridge, "brif"))
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestPodsGetDistinctIPsAndServeHTTP(t *testing.T) {
	f := env(t)
	ctx := context.Background()
	began := time.Now()
	a, b := newPod(t, f, "alpha"), newPod(t, f, "beta")
	if a.IP == "" || a.IP == b.IP {
		t.Fatalf("pod IPs %q and %q", a.IP, b.IP)
	}
	_, cidr, _ := net.ParseCIDR(f.opts.PodCIDR)
	for _, sb := range []*Sandbox{a, b} {
		if !cidr.Contains(net.ParseIP(sb.IP)) {
			t.Errorf("pod IP %s outside %s", sb.IP, cidr)
		}
	}
	again, err := f.rt.RunSandbox(ctx, SandboxConfig{PodUID: a.PodUID, PodName: "alpha"})
	if err != nil || again.IP != a.IP || again.ID != a.ID {
		t.Fatalf("RunSandbox is not idempotent: %+v, %v (first %+v)", again, err, a)
	}

	mem := resource.MustParse("64Mi")
	ca := start(t, f, a, ContainerConfig{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
		corev1.ResourceMemory: mem, corev1.ResourceCPU: resource.MustParse("250m")}}})
	start(t, f, b, ContainerConfig{})
	for _, sb := range []*Sandbox{a, b} {
		got := waitServing(t, sb)
		if got.Pod != sb.PodName || got.IP != sb.IP || got.Hostname != sb.Hostname {
			t.Errorf("pod %s at %s answered %+v", sb.PodName, sb.IP, got)
		}
	}

	// The limits reached the container's cgroup.
	cg := f.rt.cgroupPath(a.PodUID, ca.ID)
	if f.rt.cgroupV2 {
		expectFile(t, filepath.Join(cgroupRoot, cg, "memory.max"), fmt.Sprint(mem.Value()))
		expectFile(t, filepath.Join(cgroupRoot, cg, "cpu.max"), "25000 100000")
	} else {
		expectFile(t, filepath.Join(cgroupRoot, "memory", cg, "memory.limit_in_bytes"), fmt.Sprint(mem.Value()))
		expectFile(t, filepath.Join(cgroupRoot, "cpu", cg, "cpu.cfs_quota_us"), "25000")
		expectFile(t, filepath.Join(cgroupRoot, "cpu", cg, "cpu.shares"), "256")
	}
	// stdout goes to the attempt's log file as CRI log records stamped while the test ran.
	eventually(t, 5*time.Second, func() error {
		b, err := os.ReadFile(f.rt.LogPath(a.PodUID, "web", 0))
		if err != nil {
			return err
		}
		for _, rec := range strings.Split(string(b), "\n") {
			stamp, rest, _ := strings.Cut(rec, " ")
			if !strings.HasPrefix(rest, "stdout F ") || !strings.Contains(rest, "listening on tcp :8080") {
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, stamp)
			if err != nil || at.Before(began) || at.After(time.Now()) {
				return fmt.Errorf("record %q: time not within the test (%v)", rec, err)
			}
			return nil
		}
		return fmt.Errorf("no `<time> stdout F ...listening on tcp :8080...` record in log %q", b)
	})
}

func expectFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
		return
	}
	if got := strings.TrimSpace(string(b)); got != want {
		t.Errorf("%s = %q, want %q", path, got, want)
	}
}

// httpecho carries its own exec helpers (-version, -cat, -probe): the image
// is FROM scratch with no shell.
func TestExec(t *testing.T) {
	f := env(t)
	ctx := context.Background()
	sb := newPod(t, f, "exec")
	c := start(t, f, sb, ContainerConfig{})
	waitServing(t, sb)

	run := func(stdin io.Reader, args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code, err := f.rt.Exec(ctx, c.ID, args, stdin, &out, &errb, false)
		if err != nil {
			t.Fatalf("exec %v: %v", args, err)
		}
		return code, out.String(), errb.String()
	}
	if code, out, _ := run(nil, "/httpecho", "-version"); code != 0 || !strings.HasPrefix(out, "httpecho ") {
		t.Errorf("-version: code %d, out %q", code, out)
	}
	// The pod's shared hosts file names its IP and hostname.
	if code, out, _ := run(nil, "/httpecho", "-cat", "/etc/hosts"); code != 0 || !strings.Contains(out, sb.IP+"\t"+sb.Hostname) {
		t.Errorf("/etc/hosts: code %d, out %q", code, out)
	}
	if code, out, _ := run(strings.NewReader("through stdin\n"), "/httpecho", "-cat", "-"); code != 0 || out != "through stdin\n" {
		t.Errorf("stdin: code %d, out %q", code, out)
	}
	// Exec shares the pod's network namespace: localhost is the server.
	if code, _, _ := run(nil, "/httpecho", "-probe", "http://127.0.0.1:8080/healthz"); code != 0 {
		t.Errorf("probe of a healthy server: exit %d", code)
	}
	if _, err := get("http://" + sb.IP + ":8080/fail?what=healthz"); err == nil {
		t.Log("fail endpoint returns text, decode error expected")
	}
	if code, _, _ := run(nil, "/httpecho", "-probe", "http://127.0.0.1:8080/healthz"); code != 1 {
		t.Errorf("probe of a failing server: exit %d, want 1", code)
	}
	if _, err := f.rt.Exec(ctx, "no-such-container", []string{"/httpecho"}, nil, nil, nil, false); !errdefs.IsNotFound(err) {
		t.Errorf("exec in a missing container: %v", err)
	}
}

func TestExitEventAndStatus(t *testing.T) {
	f := env(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs := f.rt.Events(ctx)
	sb := newPod(t, f, "exiter")
	c := start(t, f, sb, ContainerConfig{})
	waitServing(t, sb)
	_, _ = get("http://" + sb.IP + ":8080/exit?code=3")

	ev := waitEvent(t, evs, c.ID, EventExit)
	if ev.ExitCode != 3 || ev.Reason != ReasonError || ev.PodUID != sb.PodUID || ev.Name != "web" {
		t.Errorf("exit event %+v", ev)
	}
	_, st := findContainer(t, f.rt, c.ID)
	if st.State != StateExited || st.ExitCode != 3 || st.Reason != ReasonError || st.FinishedAt.Before(st.StartedAt) {
		t.Errorf("status %+v", st)
	}

	// The next attempt runs beside the exited one; exit 0 means Completed.
	c1 := start(t, f, sb, ContainerConfig{Attempt: 1, Args: []string{"-exit-after", "300ms"}})
	if ev := waitEvent(t, evs, c1.ID, EventExit); ev.ExitCode != 0 || ev.Reason != ReasonCompleted || ev.Attempt != 1 {
		t.Errorf("attempt 1 exit %+v", ev)
	}
	if _, err := f.rt.StartContainer(ctx, sb, ContainerConfig{Name: "web", Image: testImage}); !errdefs.IsAlreadyExists(err) {
		t.Errorf("restarting a finished attempt: %v, want AlreadyExists", err)
	}
}

func TestOOMKilled(t *testing.T) {
	f := env(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs := f.rt.Events(ctx)
	sb := newPod(t, f, "oom")
	c := start(t, f, sb, ContainerConfig{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse("48Mi")}}})
	waitServing(t, sb)
	_, _ = get("http://" + sb.IP + ":8080/alloc?mb=256") // the kernel kills it mid-request

	// Both the shim's OOM event and the exit (reason OOMKilled) arrive, in
	// either order.
	var exit, oom *ContainerEvent
	timeout := time.After(20 * time.Second)
	for exit == nil || oom == nil {
		select {
		case ev := <-evs:
			if ev.ContainerID != c.ID {
				continue
			}
			switch ev.Type {
			case EventExit:
				exit = &ev
			case EventOOM:
				oom = &ev
			}
		case <-timeout:
			t.Fatalf("events for %s: exit %+v oom %+v", c.ID, exit, oom)
		}
	}
	if exit.Reason != ReasonOOMKilled || exit.ExitCode != 137 || oom.PodUID != sb.PodUID {
		t.Errorf("exit event %+v, oom event %+v, want OOMKilled/137", exit, oom)
	}
	_, st := findContainer(t, f.rt, c.ID)
	if st.State != StateExited || st.Reason != ReasonOOMKilled {
		t.Errorf("status %+v", st)
	}
}

func TestStopContainerEscalatesToSIGKILL(t *testing.T) {
	f := env(t)
	ctx := context.Background()
	sb := newPod(t, f, "stubborn")
	c := start(t, f, sb, ContainerConfig{Args: []string{"-ignore-sigterm"}})
	waitServing(t, sb)
	grace := 500 * time.Millisecond
	began := time.Now()
	if err := f.rt.StopContainer(ctx, c.ID, grace); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < grace {
		t.Errorf("stopped after %s, before the %s grace", took, grace)
	}
	if _, err := f.rt.Client().LoadContainer(f.rt.ctx(ctx), c.ID); !errdefs.IsNotFound(err) {
		t.Errorf("container still there: %v", err)
	}
	b, _ := os.ReadFile(c.LogPath)
	if !bytes.Contains(b, []byte("SIGTERM ignored")) {
		t.Errorf("SIGTERM never reached the process; log %q", b)
	}
	if err := f.rt.StopContainer(ctx, c.ID, grace); err != nil {
		t.Errorf("stopping a gone container: %v", err)
	}

	// A well-behaved process exits on SIGTERM well before the grace period.
	c2 := start(t, f, sb, ContainerConfig{Attempt: 1})
	waitServing(t, sb)
	began = time.Now()
	if err := f.rt.StopContainer(ctx, c2.ID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("graceful stop took %s", took)
	}
}

// A second Runtime on the same containerd (an agent restart) finds the
// pods, their IPs and running containers, and starting the same attempt
// again adopts it instead of failing or duplicating.
func TestAdoptionAfterRestart(t *testing.T) {
	f := env(t)
	ctx := context.Background()
	sb := newPod(t, f, "adopt")
	c := start(t, f, sb, ContainerConfig{})
	waitServing(t, sb)

	rt2, err := New(ctx, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	p, st := findContainer(t, rt2, c.ID)
	if p.ID != sb.ID || p.IP != sb.IP || p.PodName != "adopt" || !p.Ready {
		t.Errorf("adopted sandbox %+v, want %+v", p.Sandbox, sb)
	}
	if st.State != StateRunning || st.Pid != c.Pid || st.Name != "web" || st.LogPath != c.LogPath ||
		!st.StartedAt.Equal(c.StartedAt) {
		t.Errorf("adopted container %+v, started %+v", st, c)
	}
	again, err := rt2.StartContainer(ctx, &p.Sandbox, ContainerConfig{Name: "web", Image: testImage})
	if err != nil || again.ID != c.ID || again.Pid != c.Pid {
		t.Errorf("StartContainer after restart: %+v, %v", again, err)
	}
	// The adopting runtime can tear the pod down completely.
	if err := rt2.StopSandbox(ctx, sb.PodUID); err != nil {
		t.Fatal(err)
	}
	assertGone(t, rt2, sb, []string{c.ID}, nil)
}

func TestStopSandboxLeavesNothing(t *testing.T) {
	f := env(t)
	ctx := context.Background()
	before := bridgePorts(f.opts.Bridge)
	sb := newPod(t, f, "cleanup")
	var veths []string
	for _, p := range bridgePorts(f.opts.Bridge) {
		if !slices.Contains(before, p) {
			veths = append(veths, p)
		}
	}
	if len(veths) != 1 {
		t.Fatalf("pod added bridge ports %v (before %v)", veths, before)
	}
	c0 := start(t, f, sb, ContainerConfig{})
	c1 := start(t, f, sb, ContainerConfig{Name: "sidecar", Env: []string{"PORT=8081"}})
	waitServing(t, sb)
	ipFile := reservation(t, f, sb)

	// The bridge plugin's masquerade rules name the sandbox.
	if nat := natRules(t); !strings.Contains(nat, sb.ID) {
		t.Errorf("no NAT rule mentions %s:\n%s", sb.ID, nat)
	}

	if err := f.rt.StopSandbox(ctx, sb.PodUID); err != nil {
		t.Fatal(err)
	}
	assertGone(t, f.rt, sb, []string{c0.ID, c1.ID}, veths)
	if nat := natRules(t); strings.Contains(nat, sb.ID) {
		t.Errorf("NAT rules for %s remain:\n%s", sb.ID, nat)
	}
	if _, err := os.Stat(ipFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("IP %s still reserved: %v", sb.IP, err)
	}
	if err := f.rt.StopSandbox(ctx, sb.PodUID); err != nil {
		t.Errorf("second StopSandbox: %v", err)
	}
}

func assertGone(t *testing.T, rt *Runtime, sb *Sandbox, ids, veths []string) {
	t.Helper()
	ctx := rt.ctx(context.Background())
	if _, err := os.Stat(sb.NetNSPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("netns file %s remains: %v", sb.NetNSPath, err)
	}
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); bytes.Contains(mi, []byte(sb.NetNSPath)) {
		t.Errorf("netns %s still mounted", sb.NetNSPath)
	}
	for _, v := range veths {
		if _, err := os.Stat(filepath.Join("/sys/class/net", v)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("veth %s remains", v)
		}
	}
	if _, err := os.Stat(sb.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod dir %s remains", sb.Dir)
	}
	podCgroup := filepath.Join(cgroupRoot, "memory", rt.o.Namespace, "pod"+shortHash(sb.PodUID))
	if rt.cgroupV2 {
		podCgroup = filepath.Join(cgroupRoot, rt.o.Namespace, "pod"+shortHash(sb.PodUID))
	}
	if _, err := os.Stat(podCgroup); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod cgroup %s remains", podCgroup)
	}
	cl := rt.Client()
	tasks, err := cl.TaskService().List(ctx, &tasksapi.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range append([]string{sb.ID}, ids...) {
		if _, err := cl.LoadContainer(ctx, id); !errdefs.IsNotFound(err) {
			t.Errorf("containerd container %s remains: %v", id, err)
		}
		if _, err := cl.SnapshotService(snapshotter).Stat(ctx, id); !errdefs.IsNotFound(err) {
			t.Errorf("snapshot %s remains: %v", id, err)
		}
		for _, task := range tasks.Tasks {
			if task.ID == id {
				t.Errorf("task %s remains", id)
			}
		}
	}
	pods, err := rt.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.PodUID == sb.PodUID {
			t.Errorf("List still shows the pod: %+v", p)
		}
	}
}

// Concurrent RunSandbox calls for one pod (a kubelet resync racing a watch
// event) end with one sandbox and one IP.
func TestRunSandboxConcurrentSameUID(t *testing.T) {
	f := env(t)
	uid := "uid-race-" + randHex(4)
	t.Cleanup(func() { _ = f.rt.StopSandbox(context.Background(), uid) })
	const n = 4
	got := make([]*Sandbox, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = f.rt.RunSandbox(context.Background(), SandboxConfig{PodUID: uid, PodName: "race"})
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got[i].IP != got[0].IP || got[i].ID != got[0].ID {
			t.Errorf("call %d got %s/%s, call 0 got %s/%s", i, got[i].ID, got[i].IP, got[0].ID, got[0].IP)
		}
	}
}

func TestImportImageNamesAndTTYExec(t *testing.T) {
	f := env(t)
	ctx := context.Background()
	names, err := f.rt.ImportImage(ctx, filepath.Join(f.root, "images", "httpecho.tar"))
	if err != nil || !slices.Contains(names, testImage) {
		t.Fatalf("re-import: %v, %v", names, err)
	}
	if _, err := f.rt.ImportImage(ctx, filepath.Join(f.root, "missing.tar")); err == nil {
		t.Error("importing a missing tarball: want an error")
	}
	sb := newPod(t, f, "tty")
	c := start(t, f, sb, ContainerConfig{})
	waitServing(t, sb)
	var out bytes.Buffer
	code, err := f.rt.Exec(ctx, c.ID, []string{"/httpecho", "-version"}, nil, &out, nil, true)
	if err != nil || code != 0 || !strings.Contains(out.String(), "httpecho") {
		t.Errorf("tty exec: code %d, %v, out %q", code, err, out.String())
	}
}

// hostPort: portmap DNATs a node port to the pod; UDP echo answers on the
// pod IP too.
func TestHostPortAndUDP(t *testing.T) {
	f := env(t)
	hostIP := nodeIP(t)
	port := int32(20000 + int(randHex(1)[0])%500)
	sb, err := f.rt.RunSandbox(context.Background(), SandboxConfig{PodUID: "uid-hp-" + randHex(4), PodName: "hostport",
		PortMappings: []PortMapping{{HostPort: port, ContainerPort: 8080}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.rt.StopSandbox(context.Background(), sb.PodUID) })
	start(t, f, sb, ContainerConfig{})
	waitServing(t, sb)
	eventually(t, 10*time.Second, func() error {
		got, err := get(fmt.Sprintf("http://%s:%d/", hostIP, port))
		if err == nil && got.Pod != "hostport" {
			err = fmt.Errorf("answered by %+v", got)
		}
		return err
	})

	conn, err := net.Dial("udp", sb.IP+":8080")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	eventually(t, 5*time.Second, func() error {
		if _, err := conn.Write([]byte("ping")); err != nil {
			return err
		}
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		buf := make([]byte, 16)
		n, err := conn.Read(buf)
		if err == nil && string(buf[:n]) != "ping" {
			err = fmt.Errorf("echo %q", buf[:n])
		}
		return err
	})
}

func nodeIP(t *testing.T) string {
	t.Helper()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !strings.HasPrefix(n.IP.String(), "10.213.") {
			return n.IP.String()
		}
	}
	needs.Skip(t, "no non-loopback IPv4 address on this node")
	return ""
}

func natRules(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("iptables", "-t", "nat", "-S").CombinedOutput()
	if err != nil {
		needs.Skipf(t, "iptables: %v %s", err, out)
	}
	return string(out)
}

// StartContainerd on a root whose daemon still serves (the agent restarted,
// containerd did not) adopts it; stopping the adopted handle leaves it up.
func TestStartContainerdAdoptsServingDaemon(t *testing.T) {
	f := env(t)
	ctx := context.Background()
	d, err := StartContainerd(ctx, f.root)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Adopted || d.Socket != f.daemon.Socket {
		t.Fatalf("got %+v, want the running daemon at %s adopted", d, f.daemon.Socket)
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	if !serving(ctx, f.daemon.Socket) {
		t.Fatal("stopping an adopted daemon stopped the real one")
	}
}

// A finished pod keeps its containers' records and logs, nothing else: no process (task or
// shim), no network (the IP is released), no other file; StopSandbox removes the rest.
func TestFinishSandboxKeepsOnlyTheLogs(t *testing.T) {
	f := env(t)
	ctx := context.Background()
	sb := newPod(t, f, "finish")
	c := start(t, f, sb, ContainerConfig{})
	waitServing(t, sb)
	ipFile := reservation(t, f, sb)
	vol := filepath.Join(sb.Dir, "volumes", "kubernetes.io~empty-dir", "scratch")
	if err := os.MkdirAll(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second finds it finished: nothing to do
		if err := f.rt.FinishSandbox(ctx, sb.PodUID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(ipFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("IP %s still reserved: %v", sb.IP, err)
	}
	if _, err := os.Stat(sb.NetNSPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("netns %s remains: %v", sb.NetNSPath, err)
	}
	if entries, _ := os.ReadDir(sb.Dir); len(entries) != 1 || entries[0].Name() != "logs" {
		t.Errorf("pod dir holds %v, want logs alone", entries)
	}
	if ctr, err := f.rt.Client().LoadContainer(f.rt.ctx(ctx), c.ID); err != nil {
		t.Errorf("container %s is gone: %v", c.ID, err)
	} else if _, err := ctr.Task(f.rt.ctx(ctx), nil); !errdefs.IsNotFound(err) {
		t.Errorf("task of %s remains: %v", c.ID, err)
	}
	pods, err := f.rt.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(pods, func(p SandboxStatus) bool { return p.PodUID == sb.PodUID })
	if i < 0 || !pods[i].Finished || pods[i].Ready || pods[i].IP != "" || len(pods[i].Containers) != 1 {
		t.Fatalf("listed %+v, want the finished sandbox with its one container", pods)
	}
	if log, err := os.ReadFile(pods[i].Containers[0].LogPath); err != nil || !strings.Contains(string(log), "listening on") {
		t.Errorf("log %q: %v", log, err)
	}
	if err := f.rt.StopSandbox(ctx, sb.PodUID); err != nil {
		t.Fatal(err)
	}
	assertGone(t, f.rt, sb, []string{c.ID}, nil)
}

// reservation is the IPAM file that holds the pod's IP; it must exist.
func reservation(t *testing.T, f *fixture, sb *Sandbox) string {
	t.Helper()
	ipFile := filepath.Join(f.opts.Root, "cni", "ipam", "skiff", sb.IP)
	if _, err := os.Stat(ipFile); err != nil {
		t.Fatalf("IPAM has no reservation for %s: %v", sb.IP, err)
	}
	return ipFile
}

// hexValue is the number a randHex string spells.
func hexValue(s string) uint64 {
	n, _ := strconv.ParseUint(s, 16, 64)
	return n
}
