package kubelet_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/actors/kubelet"
	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"golang.org/x/sys/unix"
)

func TestNodeRegistersAndRenewsLease(t *testing.T) {
	h := start(t)
	var n *corev1.Node
	wait(t, 30*time.Second, func() error {
		o, err := h.cp.Client.Get(context.Background(), controllerkit.MustKind("", "nodes"), "", nodeName)
		if err != nil {
			return err
		}
		n = o.(*corev1.Node)
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node not ready: %+v", n.Status.Conditions)
	})
	cpu, mem, _ := h.n.Runtime.NodeResources()
	if !n.Status.Capacity.Cpu().Equal(cpu) || !n.Status.Allocatable.Memory().Equal(mem) || n.Spec.PodCIDR != h.n.Options.PodCIDR ||
		n.Status.NodeInfo.KubeletVersion != kubelet.Version || len(n.Status.Addresses) != 2 || n.Status.Addresses[0].Address == "" {
		t.Errorf("node %+v / %+v", n.Spec, n.Status)
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	if info := n.Status.NodeInfo; info.KernelVersion != unix.ByteSliceToString(uts.Release[:]) || info.OSImage == "" || info.BootID == "" {
		t.Errorf("node info %+v: want the host's kernel release, OS image and boot id (kubectl get nodes -o wide)", info)
	}
	getLease := func() (*coordv1.Lease, error) {
		o, err := h.cp.Client.Get(context.Background(), controllerkit.MustKind("coordination.k8s.io", "leases"), kubelet.LeaseNamespace, nodeName)
		if err != nil {
			return nil, err
		}
		return o.(*coordv1.Lease), nil
	}
	lease := func() *coordv1.Lease {
		l, err := getLease()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	var first *coordv1.Lease
	wait(t, 10*time.Second, func() (err error) {
		first, err = getLease()
		return err
	})
	if *first.Spec.HolderIdentity != nodeName || *first.Spec.LeaseDurationSeconds != 40 {
		t.Fatalf("lease %+v", first.Spec)
	}
	h.expectEvent("NodeReady")
	h.expectEvent("Starting")
	wait(t, 10*time.Second, func() error {
		if !lease().Spec.RenewTime.After(first.Spec.RenewTime.Time) {
			return fmt.Errorf("lease not renewed")
		}
		return nil
	})
}

// The acceptance path: a Deployment through the scheduler and controllers onto real
// containers; then deleting it stops everything and leaves nothing on the node.
func TestDeploymentRunsServesAndCleansUp(t *testing.T) {
	h := start(t)
	before := bridgePorts(h.n.Options.Bridge)
	tmpl := pod("x").Spec
	tmpl.NodeName = ""
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "echo"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "echo"}}, Spec: tmpl},
		},
	}
	d.Spec.Template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}}
	startups := startupCount(t)
	if _, err := h.cp.Client.Create(ctx(t), d); err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	wait(t, 60*time.Second, func() error {
		objs, _, err := h.cp.Client.List(context.Background(), controllerkit.MustKind("", "pods"), "default", url.Values{"labelSelector": {"app=echo"}})
		if err != nil {
			return err
		}
		pods = controllerkit.Pods(objs)
		if len(pods) != 2 {
			return fmt.Errorf("%d pods", len(pods))
		}
		for _, p := range pods {
			if err := runningReady(p); err != nil {
				return err
			}
			cs := p.Status.ContainerStatuses
			if len(cs) != 1 || cs[0].State.Running == nil || !cs[0].Ready || !*cs[0].Started || !strings.HasPrefix(cs[0].ContainerID, "containerd://") ||
				p.Status.HostIP == "" || p.Status.StartTime == nil {
				return fmt.Errorf("pod %s status %+v", p.Name, p.Status)
			}
		}
		return nil
	})
	if pods[0].Status.PodIP == pods[1].Status.PodIP {
		t.Fatalf("both pods have IP %s", pods[0].Status.PodIP)
	}
	// The image was imported, so Pulled says it was present; then Created and Started.
	for _, reason := range []string{"Pulled", "Created", "Started"} {
		h.expectEvent(reason)
	}
	if got := startupCount(t) - startups; got != 2 {
		t.Errorf("skiff_pod_startup_duration_seconds observed %d startups, want 2", got)
	}
	for _, p := range pods {
		got, err := httpGet("http://" + p.Status.PodIP + ":8080/")
		if err != nil {
			t.Fatal(err)
		}
		// POD_NAME and POD_IP came from fieldRefs.
		if got.Pod != p.Name || got.IP != p.Status.PodIP {
			t.Errorf("pod %s at %s answered %+v", p.Name, p.Status.PodIP, got)
		}
	}
	sandboxes := map[string]*kruntime.SandboxStatus{}
	for _, p := range pods {
		sb := h.sandboxOf(p)
		if sb == nil || len(sb.Containers) != 1 {
			t.Fatalf("runtime has %+v for %s", sb, p.Name)
		}
		sandboxes[p.Name] = sb
	}
	added := diff(bridgePorts(h.n.Options.Bridge), before)
	if len(added) != 2 {
		t.Fatalf("bridge ports added: %v", added)
	}

	if err := h.cp.Client.Delete(ctx(t), controllerkit.MustKind("apps", "deployments"), "default", "echo", nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		h.waitGone(p.Name)
	}
	wait(t, 10*time.Second, func() error {
		all, err := h.n.Runtime.List(context.Background())
		if err != nil {
			return err
		}
		if len(all) != 0 {
			return fmt.Errorf("runtime still has %+v", all)
		}
		return nil
	})
	for _, sb := range sandboxes {
		if _, err := os.Stat(sb.NetNSPath); !os.IsNotExist(err) {
			t.Errorf("netns %s remains: %v", sb.NetNSPath, err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(h.n.Options.Root, "netns")); len(ents) != 0 {
		t.Errorf("netns dir not empty: %v", ents)
	}
	out, _ := exec.Command("ip", "-o", "link", "show", "master", h.n.Options.Bridge).CombinedOutput()
	for _, v := range added {
		if strings.Contains(string(out), v) {
			t.Errorf("veth %s remains: %s", v, out)
		}
		if _, err := os.Stat(filepath.Join("/sys/class/net", v)); !os.IsNotExist(err) {
			t.Errorf("veth %s remains", v)
		}
	}
	h.expectEvent("Killing")
}

func TestCrashLoopBackOff(t *testing.T) {
	h := start(t)
	reasons := h.watchReasons("crasher")
	h.create(pod("crasher", func(p *corev1.Pod) {
		p.Spec.Containers[0].Args = []string{"-exit-after", "200ms", "-exit-code", "3"}
	}))
	p := h.waitPod("crasher", 60*time.Second, func(p *corev1.Pod) error {
		cs := p.Status.ContainerStatuses
		if len(cs) != 1 || cs[0].RestartCount < 3 || !reasons.seen("CrashLoopBackOff") {
			return fmt.Errorf("containers %+v, reasons %v", cs, reasons.list())
		}
		return nil
	})
	last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
	if last == nil || last.ExitCode != 3 || last.Reason != kruntime.ReasonError {
		t.Errorf("lastState %+v", p.Status.ContainerStatuses[0].LastTerminationState)
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s, want Running (restarting)", p.Status.Phase)
	}
	// Only the latest attempt is kept in containerd.
	if sb := h.sandboxOf(p); sb == nil || len(sb.Containers) > 2 {
		t.Errorf("runtime keeps %+v", sb)
	}
	h.expectEvent("BackOff")
}

func TestRestartPolicyNeverAndOOMKilled(t *testing.T) {
	h := start(t)
	h.create(pod("done", func(p *corev1.Pod) {
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.Containers[0].Args = []string{"-exit-after", "200ms"}
	}))
	h.create(pod("hog", func(p *corev1.Pod) {
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("48Mi")}
	}))
	done := h.waitPod("done", 30*time.Second, func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
	if term := done.Status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 0 || term.Reason != kruntime.ReasonCompleted {
		t.Errorf("done: %+v", done.Status.ContainerStatuses)
	}
	hog := h.waitPod("hog", 30*time.Second, runningReady)
	hit(t, "http://"+hog.Status.PodIP+":8080/alloc?mb=256") // the kernel kills it mid-request
	hog = h.waitPod("hog", 30*time.Second, func(p *corev1.Pod) error {
		cs := p.Status.ContainerStatuses
		if p.Status.Phase != corev1.PodFailed || cs[0].State.Terminated == nil {
			return fmt.Errorf("phase %s %+v", p.Status.Phase, cs)
		}
		return nil
	})
	if term := hog.Status.ContainerStatuses[0].State.Terminated; term.Reason != kruntime.ReasonOOMKilled || term.ExitCode != 137 {
		t.Errorf("hog terminated %+v, want OOMKilled/137", term)
	}
	h.expectEvent("OOMKilling")
	if hog.Status.ContainerStatuses[0].RestartCount != 0 || controllerkit.IsPodReady(hog) {
		t.Errorf("hog %+v", hog.Status)
	}
	// Finished pods keep nothing running on the node (only their logs).
	h.waitFinished(hog)
}

func TestProbes(t *testing.T) {
	h := start(t)
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1,
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(8080)}}}
	}
	h.create(pod("live", func(p *corev1.Pod) { p.Spec.Containers[0].LivenessProbe = probe("/healthz") }))
	h.create(pod("ready", func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe = probe("/ready") }))
	h.create(pod("execready", func(p *corev1.Pod) {
		p.Spec.Containers[0].StartupProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 5,
			ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}}
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, TimeoutSeconds: 3, FailureThreshold: 1,
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/httpecho", "-probe", "http://127.0.0.1:8080/ready"}}}}
	}))
	live := h.waitPod("live", 30*time.Second, runningReady)
	ready := h.waitPod("ready", 30*time.Second, runningReady)
	execReady := h.waitPod("execready", 30*time.Second, runningReady)

	// A failing liveness probe restarts the container (a new attempt: restartCount 1).
	hit(t, "http://"+live.Status.PodIP+":8080/fail?what=healthz")
	live = h.waitPod("live", 30*time.Second, func(p *corev1.Pod) error {
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount < 1 || cs.State.Running == nil || cs.LastTerminationState.Terminated == nil {
			return fmt.Errorf("live %+v", cs)
		}
		return nil
	})
	// Running is reported once the process started, maybe before it listens.
	wait(t, 10*time.Second, func() error {
		if _, err := httpGet("http://" + live.Status.PodIP + ":8080/"); err != nil {
			return fmt.Errorf("restarted container does not serve: %v", err)
		}
		return nil
	})
	h.expectEvent("Unhealthy")

	// A failing readiness probe takes the pod out of Ready without a restart, and back.
	for _, p := range []*corev1.Pod{ready, execReady} {
		hit(t, "http://"+p.Status.PodIP+":8080/fail?what=ready")
		h.waitPod(p.Name, 20*time.Second, func(p *corev1.Pod) error {
			cs := p.Status.ContainerStatuses[0]
			if controllerkit.IsPodReady(p) || cs.Ready || cs.State.Running == nil || cs.RestartCount != 0 {
				return fmt.Errorf("%s: ready %v %+v", p.Name, controllerkit.IsPodReady(p), cs)
			}
			return nil
		})
		hit(t, "http://"+p.Status.PodIP+":8080/recover?what=ready")
		h.waitPod(p.Name, 20*time.Second, runningReady)
	}
}

// An agent restart — the actor crashing, and a brand-new agent with a fresh runtime handle
// — adopts the running containers (same pid, no duplicate) and removes what has no pod.
func TestAdoptionAfterRestart(t *testing.T) {
	h := start(t)
	h.create(pod("keep"))
	p := h.waitPod("keep", 30*time.Second, runningReady)
	sb := h.sandboxOf(p)
	if sb == nil || len(sb.Containers) != 1 || sb.Containers[0].Pid == 0 {
		t.Fatalf("sandbox %+v", sb)
	}
	pid := sb.Containers[0].Pid

	same := func(stage string) {
		t.Helper()
		now := h.sandboxOf(p)
		if now == nil || len(now.Containers) != 1 || now.Containers[0].Pid != pid || now.Containers[0].State != kruntime.StateRunning {
			t.Fatalf("%s: runtime has %+v, want the one container with pid %d", stage, now, pid)
		}
		cur, err := h.get("keep")
		if err != nil || cur.Status.ContainerStatuses[0].RestartCount != 0 || runningReady(cur) != nil {
			t.Fatalf("%s: pod %+v, %v", stage, cur, err)
		}
		if _, err := httpGet("http://" + p.Status.PodIP + ":8080/"); err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
	}

	// 1. The actor crashes and its supervisor restarts it.
	h.cp.Actors.Send(h.pid, &actorkit.Crash{})
	h.create(pod("after-crash"))
	h.waitPod("after-crash", 30*time.Second, runningReady)
	same("after crash")

	// 2. A brand-new agent on a new runtime handle; meanwhile a pod vanished while no agent
	// ran, and a sandbox appeared that no pod owns.
	h.stop()
	gone, _ := h.get("after-crash")
	if err := h.cp.Client.Delete(ctx(t), controllerkit.MustKind("", "pods"), "default", "after-crash",
		&metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	stray, err := h.n.Runtime.RunSandbox(context.Background(), kruntime.SandboxConfig{PodUID: "no-such-pod", PodName: "stray", PodNamespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	rt2, err := h.n.NewRuntime(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt2.Close() })
	h.cfg.Runtime = rt2
	h.spawn()
	wait(t, 30*time.Second, func() error {
		for _, uid := range []string{string(gone.UID), stray.PodUID} {
			if s := h.sandboxOf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}); s != nil {
				return fmt.Errorf("sandbox of %s still there", uid)
			}
		}
		return nil
	})
	h.create(pod("after-new"))
	h.waitPod("after-new", 30*time.Second, runningReady)
	same("after a new agent")
}

// Pod-level: graceful deletion stops the container with SIGTERM within the grace period, and
// a pod recreated under the same name gets a new sandbox.
func TestGracefulDeleteAndRecreate(t *testing.T) {
	h := start(t)
	h.create(pod("stubborn", func(p *corev1.Pod) { p.Spec.Containers[0].Args = []string{"-ignore-sigterm"} }))
	first := h.waitPod("stubborn", 30*time.Second, runningReady)
	began := time.Now()
	h.deletePod("stubborn")
	h.waitGone("stubborn")
	if took := time.Since(began); took < 2*time.Second {
		t.Errorf("gone after %s, before the 2 s grace period", took)
	}
	if h.sandboxOf(first) != nil {
		t.Errorf("sandbox of the deleted pod remains")
	}
	h.create(pod("stubborn"))
	second := h.waitPod("stubborn", 30*time.Second, runningReady)
	if second.UID == first.UID || h.sandboxOf(second) == nil {
		t.Errorf("recreated pod %s", second.UID)
	}
}

// reasons records every waiting/terminated reason the informer sees for a pod: transient
// states (CrashLoopBackOff) show between polls.
type reasons struct {
	mu sync.Mutex
	m  map[string]bool
}

func (r *reasons) seen(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[s]
}

func (r *reasons) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k := range r.m {
		out = append(out, k)
	}
	return out
}

func (h *harness) watchReasons(name string) *reasons {
	r := &reasons{m: map[string]bool{}}
	inf := informer.For(h.cp.Log, "", "pods")
	note := func(o runtime.Object) {
		p := o.(*corev1.Pod)
		if p.Name != name {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			if cs.State.Waiting != nil {
				r.m[cs.State.Waiting.Reason] = true
			}
			if cs.State.Terminated != nil {
				r.m[cs.State.Terminated.Reason] = true
			}
		}
	}
	inf.AddHandler(informer.Funcs{Add: note, Update: func(_, o runtime.Object) { note(o) }})
	c, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = inf.Run(c) }()
	h.t.Cleanup(func() { cancel(); <-done })
	return r
}

func (h *harness) expectEvent(reason string) {
	h.t.Helper()
	wait(h.t, 10*time.Second, func() error {
		objs, _, err := h.cp.Client.List(context.Background(), controllerkit.MustKind("", "events"), "default", nil)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if e := o.(*corev1.Event); e.Reason == reason && e.Source.Component == "kubelet" && e.Source.Host == nodeName {
				return nil
			}
		}
		return fmt.Errorf("no %s event among %d", reason, len(objs))
	})
}

// startupCount is how many pod startups the kubelet's histogram has observed in this process.
func startupCount(t *testing.T) uint64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "skiff_pod_startup_duration_seconds" {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatal("skiff_pod_startup_duration_seconds is not registered")
	return 0
}

func bridgePorts(bridge string) []string {
	entries, _ := os.ReadDir(filepath.Join("/sys/class/net", bridge, "brif"))
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func diff(after, before []string) []string {
	var out []string
	for _, a := range after {
		found := false
		for _, b := range before {
			found = found || a == b
		}
		if !found {
			out = append(out, a)
		}
	}
	return out
}

// A panic in the kubelet's event handler restarts the kubelet actor, not the process: the pod
// it already ran keeps its container, and the pod whose event it crashed on still starts.
func TestAPanicInTheEventHandlerRestartsTheKubelet(t *testing.T) {
	h := start(t)
	h.create(pod("before"))
	p := h.waitPod("before", 30*time.Second, runningReady)
	sb := h.sandboxOf(p)
	if sb == nil || len(sb.Containers) != 1 {
		t.Fatalf("sandbox %+v", sb)
	}
	actorkit.InjectPanic(kubelet.FaultEvent(nodeName), 1)
	h.create(pod("after"))
	wait(t, 30*time.Second, func() error {
		if n := h.cp.Actors.Health().Restarts(h.pid.Id); n != 1 {
			return fmt.Errorf("kubelet restarted %d times, want 1", n)
		}
		return nil
	})
	h.waitPod("after", 30*time.Second, runningReady)
	if now := h.sandboxOf(p); now == nil || len(now.Containers) != 1 || now.Containers[0].Pid != sb.Containers[0].Pid {
		t.Fatalf("the running pod's container changed across the restart: %+v, was %+v", now, sb)
	}
}
