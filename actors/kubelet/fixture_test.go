package kubelet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/skiff-sh/skiff/testkit/needs"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/kubelet"
	"github.com/skiff-sh/skiff/actors/kubelet/kubelettest"
	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// One containerd and image per test binary (most of the setup cost); each test gets its own
// control plane and kubelet actor, and leaves no pod behind.
var (
	node     *kubelettest.Node
	nodeErr  error
	nodeOnce sync.Once
)

func TestMain(m *testing.M) {
	code := m.Run()
	if node != nil {
		node.Close()
	}
	os.Exit(code)
}

func env(t *testing.T) *kubelettest.Node {
	t.Helper()
	if r := kubelettest.SkipReason(); r != "" {
		needs.Skip(t, r)
	}
	nodeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		node, nodeErr = kubelettest.StartNode(ctx)
	})
	if nodeErr != nil {
		t.Fatal(nodeErr)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		pods, _ := node.Runtime.List(ctx)
		for _, p := range pods {
			_ = node.Runtime.StopSandbox(ctx, p.PodUID)
		}
	})
	return node
}

const nodeName = "node-a"

type harness struct {
	t   *testing.T
	n   *kubelettest.Node
	cp  *controlplane.ControlPlane
	cfg kubelet.Config
	pid *actorkit.PID
}

// start runs a control plane (scheduler and controllers included) and a kubelet on the node.
func start(t *testing.T, mutate ...func(*kubelet.Config)) *harness {
	return startOn(t, testutil.StartControlPlane(t, func(c *controlplane.Config) { c.Bookmarks = 200 * time.Millisecond }), mutate...)
}

// startOn runs a kubelet on the node for the control plane cp.
func startOn(t *testing.T, cp *controlplane.ControlPlane, mutate ...func(*kubelet.Config)) *harness {
	n := env(t)
	h := &harness{t: t, n: n, cp: cp, cfg: kubelet.Config{Informers: cp.Informers,
		Log: cp.Log, Client: cp.Client, NodeName: nodeName, Runtime: n.Runtime,
		PodCIDR: n.Options.PodCIDR, RenewInterval: 500 * time.Millisecond, ResyncInterval: 2 * time.Second,
		BackoffBase: time.Second, BackoffMax: 4 * time.Second,
	}}
	for _, m := range mutate {
		m(&h.cfg)
	}
	h.spawn()
	return h
}

func (h *harness) spawn() {
	h.t.Helper()
	pid, err := h.cp.Actors.Spawn("kubelet", kubelet.New(h.cfg))
	if err != nil {
		h.t.Fatal(err)
	}
	h.pid = pid
	h.t.Cleanup(func() {
		if h.pid != nil {
			h.cp.Actors.Stop(h.pid)
			h.pid = nil
		}
	})
}

func (h *harness) stop() {
	h.cp.Actors.Stop(h.pid)
	h.pid = nil
}

// newAgent replaces the kubelet by a brand-new one on a new runtime handle: what a restarted
// agent process gets (the kubelet may be stopped already).
func (h *harness) newAgent() {
	h.t.Helper()
	if h.pid != nil {
		h.stop()
	}
	rt, err := h.n.NewRuntime(ctx(h.t))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = rt.Close() })
	h.cfg.Runtime = rt
	h.spawn()
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return c
}

func wait(t *testing.T, total time.Duration, f func() error) {
	t.Helper()
	testutil.Eventually(t, total, 50*time.Millisecond, f)
}

// pod is a bare httpecho pod bound to the test node.
func pod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName:                      nodeName,
			TerminationGracePeriodSeconds: ptr.To(int64(2)),
			Containers: []corev1.Container{{Name: "web", Image: kubelettest.Image,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Env: []corev1.EnvVar{
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				}}},
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func (h *harness) create(p *corev1.Pod) {
	h.t.Helper()
	if _, err := h.cp.Client.Create(ctx(h.t), p); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) get(name string) (*corev1.Pod, error) {
	o, err := h.cp.Client.Get(context.Background(), controllerkit.MustKind("", "pods"), "default", name)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.Pod), nil
}

// waitPod polls the pod until cond accepts it.
func (h *harness) waitPod(name string, total time.Duration, cond func(*corev1.Pod) error) *corev1.Pod {
	h.t.Helper()
	var got *corev1.Pod
	wait(h.t, total, func() error {
		p, err := h.get(name)
		if err != nil {
			return err
		}
		got = p
		return cond(p)
	})
	return got
}

func runningReady(p *corev1.Pod) error {
	if p.Status.Phase != corev1.PodRunning || !controllerkit.IsPodReady(p) || p.Status.PodIP == "" {
		return fmt.Errorf("pod %s: phase %s ready %v ip %q containers %+v", p.Name, p.Status.Phase, controllerkit.IsPodReady(p), p.Status.PodIP, p.Status.ContainerStatuses)
	}
	return nil
}

func (h *harness) deletePod(name string) {
	h.t.Helper()
	if err := h.cp.Client.Delete(ctx(h.t), controllerkit.MustKind("", "pods"), "default", name, nil); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) waitGone(name string) {
	h.t.Helper()
	wait(h.t, 30*time.Second, func() error {
		if _, err := h.get(name); err == nil {
			return fmt.Errorf("pod %s still exists", name)
		}
		return nil
	})
}

// sandboxOf finds a pod's sandbox in the runtime.
func (h *harness) sandboxOf(p *corev1.Pod) *kruntime.SandboxStatus {
	h.t.Helper()
	all, err := h.n.Runtime.List(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	for i := range all {
		if all[i].PodUID == string(p.UID) {
			return &all[i]
		}
	}
	return nil
}

type echo struct{ Pod, Hostname, IP string }

func httpGet(url string) (echo, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return echo{}, err
	}
	defer resp.Body.Close()
	var e echo
	if resp.StatusCode != http.StatusOK {
		return e, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return e, json.NewDecoder(resp.Body).Decode(&e)
}

func hit(t *testing.T, url string) {
	t.Helper()
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Logf("GET %s: %v (may be expected)", url, err)
		return
	}
	resp.Body.Close()
}
