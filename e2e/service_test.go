package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/skiff-sh/skiff/testkit/needs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/agent"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/deploy/images/examples"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/echoapp"
	"github.com/skiff-sh/skiff/testkit/shimreap"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// node is one control plane + one real node agent in this process.
type node struct {
	cp    *controlplane.ControlPlane
	agent *agent.Agent
}

// startNode starts a control plane and a node agent; opts adjust the agent's configuration.
func startNode(t *testing.T, opts ...func(*agent.Config)) *node {
	t.Helper()
	return startNodeWith(t, nil, func(*controlplane.Config) {}, opts...)
}

// startNodeWith is startNode with the images more builds beside httpecho and the control
// plane's settings changed by cpConfig.
func startNodeWith(t *testing.T, more []func(dir string) (string, error), cpConfig func(*controlplane.Config), opts ...func(*agent.Config)) *node {
	t.Helper()
	if why := agent.Supported(); why != "" {
		needs.Skip(t, why)
	}
	for _, bin := range []string{"containerd", "containerd-shim-runc-v2", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			needs.Skipf(t, "%s not installed (bash .ci/deps/node.sh installs it)", bin)
		}
	}
	if _, err := os.Stat("/opt/cni/bin/bridge"); err != nil {
		needs.Skip(t, "CNI plugins not installed (bash .ci/deps/node.sh installs them)")
	}
	// Short paths: containerd's socket path must fit in a unix socket address.
	dir, err := os.MkdirTemp("", "skiff-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	images := filepath.Join(dir, "images")
	for _, build := range append([]func(string) (string, error){examples.BuildHTTPEcho}, more...) {
		if _, err := build(images); err != nil {
			t.Fatal(err)
		}
	}
	cp := testutil.StartControlPlane(t, cpConfig)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := agent.Config{Log: cp.Log, Informers: cp.Informers, Client: cp.Client, NATS: cp.Conn, Actors: cp.Actors, NodeName: "e2e-node",
		DataDir: dir, PodCIDR: "10.231.0.0/24", Bridge: "skiffe2e0", ImagesDir: images}
	for _, o := range opts {
		o(&cfg)
	}
	a, err := agent.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Pods outlive an agent by design (the next one adopts them); a test removes its own.
		a.Teardown(context.Background())
		// A pod started while the teardown listed them keeps its shim, which outlives the
		// agent's containerd: one was seen still running after its test's directory was gone.
		if cfg.ContainerdSocket == "" {
			shimreap.KillUnder(dir)
		}
		// The node bridge outlives pods by design; a test's own bridge goes with the test.
		_ = exec.Command("ip", "link", "delete", "skiffe2e0").Run()
	})
	return &node{cp: cp, agent: a}
}

func (n *node) apply(t *testing.T, manifest string) {
	t.Helper()
	createAll(t, n.cp.Client, manifest)
}

func (n *node) pods(t *testing.T, selector string) []*corev1.Pod {
	return podsOf(t, n.cp.Client, selector)
}

// podsOf lists the pods of default that match selector.
func podsOf(t *testing.T, cl *apiclient.Client, selector string) []*corev1.Pod {
	k, _ := schemas.ByResource("", "v1", "pods")
	objs, _, err := cl.List(context.Background(), k, "default", map[string][]string{"labelSelector": {selector}})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*corev1.Pod))
	}
	return out
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (n *node) waitReady(t *testing.T, selector string, want int) []*corev1.Pod {
	t.Helper()
	return waitReadyPods(t, n.cp.Client, selector, want)
}

// waitReadyPods waits until want pods match selector, each Ready with an IP.
func waitReadyPods(t *testing.T, cl *apiclient.Client, selector string, want int) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	testutil.Eventually(t, 90*time.Second, 100*time.Millisecond, func() error {
		pods = podsOf(t, cl, selector)
		count := 0
		for _, p := range pods {
			if ready(p) && p.Status.PodIP != "" {
				count++
			}
		}
		if count != want {
			return fmt.Errorf("%d of %d pods %s ready", count, want, selector)
		}
		return nil
	})
	return pods
}

// clusterIP is the ClusterIP of the Service name in default.
func (n *node) clusterIP(t *testing.T, name string) string {
	t.Helper()
	svcKind, _ := schemas.ByResource("", "v1", "services")
	obj, err := n.cp.Client.Get(context.Background(), svcKind, "default", name)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*corev1.Service).Spec.ClusterIP
}

// exec runs the httpecho binary inside a pod's container and returns its output.
func (n *node) exec(t *testing.T, p *corev1.Pod, args ...string) (string, error) {
	t.Helper()
	if len(p.Status.ContainerStatuses) == 0 {
		t.Fatalf("pod %s has no container status", p.Name)
	}
	id := p.Status.ContainerStatuses[0].ContainerID
	id = id[strings.Index(id, "://")+3:]
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code, err := n.agent.Runtime.Exec(ctx, id, append([]string{"/httpecho"}, args...), nil, &out, &out, false)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit %d", code)
	}
	return out.String(), err
}

// backend is two echo pods behind a Service (TCP and UDP) and an idle client pod.
var backend = echoapp.Join(echoapp.App{Name: "backend",
	ServicePorts: "- {name: dns, port: 53, targetPort: 8080, protocol: UDP}"}.Manifest(), echoapp.ClientPod("client", ""))

// A pod reaches another Deployment's Service by ClusterIP, over TCP and UDP, spread over every
// ready backend; a backend that turns not-Ready stops getting new connections within a second.
func TestPodReachesServiceByClusterIP(t *testing.T) {
	n := startNode(t)
	n.apply(t, backend)
	backends := n.waitReady(t, "app=backend", 2)
	client := n.waitReady(t, "app=client", 1)[0]
	vip := n.clusterIP(t, "backend")

	// HTTP: both backends answer through the ClusterIP.
	seen := map[string]int{}
	testutil.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		out, err := n.exec(t, client, "-probe", "http://"+vip+":80/")
		if err != nil {
			return fmt.Errorf("GET via %s: %v: %s", vip, err, out)
		}
		var body struct {
			Pod string `json:"pod"`
		}
		if err := json.Unmarshal([]byte(out), &body); err != nil {
			return fmt.Errorf("answer %q: %v", out, err)
		}
		seen[body.Pod]++
		if len(seen) < 2 {
			return fmt.Errorf("only %v answered so far", seen)
		}
		return nil
	})
	// UDP: the answer comes back from the ClusterIP (reverse translation).
	out, err := n.exec(t, client, "-udp-probe", vip+":53")
	if err != nil || !strings.HasSuffix(strings.TrimSpace(out), "from "+vip+":53") {
		t.Fatalf("UDP via %s: %v: %q", vip, err, out)
	}
	t.Logf("TCP answers by backend: %v; UDP: %s", seen, strings.TrimSpace(out))

	// One backend turns not-Ready: within a second of that, new connections avoid it.
	sick := backends[0]
	if out, err := n.exec(t, sick, "-probe", "http://127.0.0.1:8080/fail?what=ready"); err != nil {
		t.Fatalf("make %s not ready: %v %s", sick.Name, err, out)
	}
	var notReadyAt time.Time
	testutil.Eventually(t, 20*time.Second, 20*time.Millisecond, func() error {
		k, _ := schemas.ByResource("", "v1", "pods")
		o, err := n.cp.Client.Get(context.Background(), k, "default", sick.Name)
		if err != nil {
			return err
		}
		if ready(o.(*corev1.Pod)) {
			return fmt.Errorf("%s still ready", sick.Name)
		}
		notReadyAt = time.Now()
		return nil
	})
	time.Sleep(time.Until(notReadyAt.Add(time.Second)))
	for i := range 20 {
		out, err := n.exec(t, client, "-probe", "http://"+vip+":80/")
		if err != nil {
			t.Fatalf("GET %d after the backend went not-Ready: %v %s", i, err, out)
		}
		if strings.Contains(out, sick.Name) {
			t.Fatalf("connection %d reached %s a second after it went not-Ready", i, sick.Name)
		}
	}
}
