package vm

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/skiff-sh/skiff/testkit/needs"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/controllers"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/nodeapi"
	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/echoapp"
	"github.com/skiff-sh/skiff/testkit/qemuvm"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// cluster is a control plane on the host and VM nodes that joined it over the host bridge.
type cluster struct {
	t     *testing.T
	cp    *controlplane.ControlPlane
	net   *qemuvm.HostNet
	vms   map[string]*qemuvm.VM
	nodes []string
}

// leaseRenew is how often the VM agents renew their node lease.
const leaseRenew = 2 * time.Second

// podCIDR is node i's pod range; the ranges live only inside the VMs.
func podCIDR(i int) string { return fmt.Sprintf("10.244.%d.0/24", i) }

// vmKernel skips the test unless VM tests were asked for, and fails or skips (needs) when
// the machine cannot boot VMs; it returns the kernel they boot.
func vmKernel(t *testing.T) qemuvm.Kernel {
	t.Helper()
	if os.Getenv("SKIFF_E2E_VM") != "1" {
		t.Skip("VM e2e runs only with SKIFF_E2E_VM=1 (go tool task e2e:vm)")
	}
	if why := qemuvm.Missing(); why != "" {
		needs.Skip(t, why)
	}
	k, err := qemuvm.FindKernel()
	if err != nil {
		needs.Skip(t, err)
	}
	return k
}

func startCluster(t *testing.T, n int) *cluster {
	t.Helper()
	k := vmKernel(t)
	dir := t.TempDir()
	t0 := time.Now()
	initrd := buildNodeImage(t, k, dir)
	t.Logf("built the node image in %v", time.Since(t0).Round(time.Millisecond))

	hn, err := qemuvm.NewHostNet()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hn.Close)
	// NATS listens on the bridge so the VMs reach it; the control plane uses it as an
	// external server, as `skiff server --nats-url` would.
	ns, err := natsserver.Start(natsserver.Config{Host: hn.HostIP, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) {
		c.NATSURL = ns.ClientURL()
		c.EncryptionKeyFile = filepath.Join(c.DataDir, controlplane.EncryptionKeyFileName)
		// Five missed renewals make a node NotReady: room for a slow VM under emulation;
		// its pods are evicted at once after that.
		c.Controllers = controllers.Options{NodeGracePeriod: 5 * leaseRenew, PodEvictionTimeout: time.Second, NodeMonitorPeriod: 500 * time.Millisecond}
	})
	t.Logf("control plane API at %s, NATS at %s", cp.URL(), ns.ClientURL())
	c := &cluster{t: t, cp: cp, net: hn, vms: map[string]*qemuvm.VM{}}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("vm%d", i)
		tap, mac, err := hn.Tap(i)
		if err != nil {
			t.Fatal(err)
		}
		vm, err := qemuvm.Start(qemuvm.Config{Kernel: k.Image, Initrd: initrd, Tap: tap, MAC: mac,
			Log: filepath.Join(dir, name+".log"), Cmdline: cmdline(map[string]string{
				"node": name, "ip": hn.IP(i) + "/24", "gw": hn.HostIP, "nats": ns.ClientURL(),
				"podcidr": podCIDR(i), "renew": leaseRenew.String(),
			})})
		if err != nil {
			t.Fatal(err)
		}
		c.vms[name] = vm
		c.nodes = append(c.nodes, name)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("console of %s (last 60 lines):\n%s", name, vm.Tail(60))
			}
			vm.Kill()
		})
	}
	return c
}

func (c *cluster) list(resource, selector string) []*corev1.Pod {
	k, _ := schemas.ByResource("", "v1", resource)
	objs, _, err := c.cp.Client.List(context.Background(), k, "default", map[string][]string{"labelSelector": {selector}})
	if err != nil {
		c.t.Fatal(err)
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*corev1.Pod))
	}
	return out
}

func (c *cluster) node(name string) *corev1.Node {
	k, _ := schemas.ByResource("", "v1", "nodes")
	o, err := c.cp.Client.Get(context.Background(), k, "", name)
	if err != nil {
		return nil
	}
	return o.(*corev1.Node)
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
		return false
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// describe is a pod's name, node, phase and why it is not running, for failure messages.
func describe(p *corev1.Pod) string {
	s := p.Name + "@" + p.Spec.NodeName + ":" + string(p.Status.Phase)
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			s += " (" + w.Reason + ": " + w.Message + ")"
		}
	}
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue && cond.Message != "" {
			s += " [" + string(cond.Type) + ": " + cond.Message + "]"
		}
	}
	return s
}

// bootTimes is when a VM got where, measured from its qemu start.
type bootTimes struct{ agentUp, nodeReady time.Duration }

// waitNodes waits until every VM's Node is Ready and returns how long each took from its
// qemu start, to the agent's start line on the console and to Ready.
func (c *cluster) waitNodes() map[string]*bootTimes {
	took := map[string]*bootTimes{}
	ready := 0
	testutil.Eventually(c.t, 5*time.Minute, 250*time.Millisecond, func() error {
		for _, name := range c.nodes {
			vm := c.vms[name]
			if vm.Exited() {
				c.t.Fatalf("VM %s exited before its Node was Ready", name)
			}
			bt := took[name]
			if bt == nil {
				bt = &bootTimes{}
				took[name] = bt
			}
			if bt.agentUp == 0 && vm.Contains("skiff agent "+name+" is up") {
				bt.agentUp = time.Since(vm.Started)
			}
			if bt.nodeReady == 0 {
				if n := c.node(name); n != nil && nodeReady(n) {
					bt.nodeReady = time.Since(vm.Started)
					ready++
				}
			}
		}
		if ready < len(c.nodes) {
			return fmt.Errorf("%d of %d nodes Ready", ready, len(c.nodes))
		}
		return nil
	})
	return took
}

// waitPods waits for want ready pods matching selector, accepted by ok, and returns them.
func (c *cluster) waitPods(selector string, want int, total time.Duration, ok func(*corev1.Pod) bool) []*corev1.Pod {
	c.t.Helper()
	var ready []*corev1.Pod
	testutil.Eventually(c.t, total, 250*time.Millisecond, func() error {
		ready = ready[:0]
		var where []string
		for _, p := range c.list("pods", selector) {
			where = append(where, describe(p))
			if podReady(p) && ok(p) {
				ready = append(ready, p)
			}
		}
		if len(ready) != want {
			return fmt.Errorf("%d of %d pods %s ready: %v", len(ready), want, selector, where)
		}
		return nil
	})
	return ready
}

// exec runs httpecho in a pod's container through the pod's node API over NATS (the path
// the apiserver's exec takes) and returns its output.
func (c *cluster) exec(p *corev1.Pod, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var rep nodeapi.ExecReply
	err := nodeapi.Call(ctx, c.cp.Conn, nodeapi.ExecSubject(p.Spec.NodeName), nodeapi.ExecRequest{
		PodUID: string(p.UID), Container: "echo", Command: append([]string{"/httpecho"}, args...)}, &rep)
	out := string(rep.Stdout) + string(rep.Stderr)
	if err == nil && rep.ExitCode != 0 {
		err = fmt.Errorf("exit %d", rep.ExitCode)
	}
	return out, err
}

// answers GETs the Service from the client pod until every pod in want has answered.
func (c *cluster) answers(client *corev1.Pod, url string, want map[string]bool, total time.Duration) {
	c.t.Helper()
	seen := map[string]bool{}
	testutil.Eventually(c.t, total, 200*time.Millisecond, func() error {
		out, err := c.exec(client, "-probe", url)
		if err != nil {
			return fmt.Errorf("GET %s from %s: %v: %s", url, client.Spec.NodeName, err, out)
		}
		var body struct {
			Pod string `json:"pod"`
		}
		if err := json.Unmarshal([]byte(out), &body); err != nil {
			return fmt.Errorf("answer %q: %v", out, err)
		}
		if !want[body.Pod] {
			return fmt.Errorf("answered by %s, want only %v", body.Pod, want)
		}
		seen[body.Pod] = true
		if len(seen) < len(want) {
			return fmt.Errorf("only %v answered so far, want %v", seen, want)
		}
		return nil
	})
}

// manifests: one backend per node while both are up (a tainted, dead node does not count), and
// a client pod on vm2.
var manifests = echoapp.Join(echoapp.App{Name: "backend", PodSpec: `topologySpreadConstraints:
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: DoNotSchedule
  nodeTaintsPolicy: Honor
  labelSelector: {matchLabels: {app: backend}}`}.Manifest(), echoapp.ClientPod("client", "vm2"))

var uptimeRe = regexp.MustCompile(`skiff-vm: \S+ userland up at ([0-9.]+)s`)

// Two VM nodes join a control plane on the host; a pod on VM2 reaches a Service whose
// backends run on both VMs (the one on VM1 across the host bridge); then VM1 loses power and
// its backend is replaced on VM2, which keeps serving.
func TestTwoVMNodesServeAndSurviveANodeLoss(t *testing.T) {
	suite := time.Now()
	c := startCluster(t, 2)
	took := c.waitNodes()
	for _, name := range c.nodes {
		boot := "?"
		if m := uptimeRe.FindStringSubmatch(c.vms[name].Tail(1000)); m != nil {
			boot = m[1] + "s"
		}
		bt := took[name]
		t.Logf("%s: qemu start -> userland %s (guest clock) -> agent up %v -> Node Ready %v", name, boot,
			bt.agentUp.Round(time.Millisecond), bt.nodeReady.Round(time.Millisecond))
	}

	applied := time.Now()
	docs, err := schemas.DecodeManifests([]byte(manifests))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if _, err := c.cp.Client.Create(context.Background(), d.Object); err != nil {
			t.Fatal(err)
		}
	}
	anyPod := func(*corev1.Pod) bool { return true }
	backends := c.waitPods("app=backend", 2, 5*time.Minute, anyPod)
	client := c.waitPods("app=client", 1, 5*time.Minute, anyPod)[0]
	if client.Spec.NodeName != "vm2" {
		t.Fatalf("client on %s, want vm2", client.Spec.NodeName)
	}
	onNode := map[string]string{}
	want := map[string]bool{}
	for _, b := range backends {
		onNode[b.Spec.NodeName] = b.Name
		want[b.Name] = true
	}
	if onNode["vm1"] == "" || onNode["vm2"] == "" {
		t.Fatalf("backends not spread over both VMs: %v", onNode)
	}
	k, _ := schemas.ByResource("", "v1", "services")
	svc, err := c.cp.Client.Get(context.Background(), k, "default", "backend")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + svc.(*corev1.Service).Spec.ClusterIP + ":80/"
	c.answers(client, url, want, 2*time.Minute)
	t.Logf("apply to serving (both backends answered the client on vm2, one from vm1): %v", time.Since(applied).Round(time.Millisecond))

	// Fault: VM1 loses power.
	killed := time.Now()
	c.vms["vm1"].Kill()
	testutil.Eventually(t, 2*time.Minute, 250*time.Millisecond, func() error {
		if n := c.node("vm1"); n != nil && nodeReady(n) {
			return fmt.Errorf("vm1 still Ready")
		}
		return nil
	})
	notReady := time.Since(killed)
	onVM2 := func(p *corev1.Pod) bool { return p.Spec.NodeName == "vm2" }
	replaced := c.waitPods("app=backend", 2, 3*time.Minute, onVM2)
	want = map[string]bool{}
	for _, b := range replaced {
		want[b.Name] = true
	}
	c.answers(client, url, want, 2*time.Minute)
	t.Logf("fault: vm1 killed -> Node NotReady %v, -> 2 backends on vm2 serving the client %v",
		notReady.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	t.Logf("suite total %v", time.Since(suite).Round(time.Millisecond))
}
