package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/skiff-sh/skiff/actors/netpol"
	"github.com/skiff-sh/skiff/bpf/policy"
	"github.com/skiff-sh/skiff/bpf/tcattach"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/echoapp"
	"github.com/skiff-sh/skiff/testkit/netnscluster"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// NetworkPolicy on two netns nodes with real pods: web on node A; clients "client"
// (role=client, node B), "other" (node A, the same-node path) and "scraper" (namespace mon,
// team=mon, node B). Each step counts new TCP connections from every client (attempts vs
// successes) and checks that a keep-alive connection opened before any policy still serves.
// Node A's agent is restarted with policies in force: they hold while it is down and after.
func TestNetnsNetworkPolicy(t *testing.T) {
	// A grace period longer than the agent restart: web must not be evicted meanwhile.
	c := startCluster(t, netnscluster.Options{Nodes: 2, NodeGracePeriod: 60 * time.Second})
	a, b := c.Nodes[0], c.Nodes[1]
	c.apply(echoapp.Join(echoDeployment("web", 1, a.Name), echoapp.ClientPod("client", b.Name), echoapp.ClientPod("other", a.Name),
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"mon","labels":{"team":"mon"}}}`))
	// The namespace's default ServiceAccount comes a moment after it.
	scraper := strings.Replace(echoapp.ClientPod("scraper", b.Name), "metadata: {", "metadata: {namespace: mon, ", 1)
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error { return c.tryApply(scraper) })
	web := c.waitPods("app=web", 1, 90*time.Second, onNode(a.Name))[0]
	client := c.waitPods("app=client", 1, 60*time.Second, nil)[0]
	c.waitPods("app=other", 1, 60*time.Second, nil)
	target := net.JoinHostPort(web.Status.PodIP, "8080")
	from := map[string]uint32{
		"client":  c.podPid(b, "client"),
		"other":   c.podPid(a, "other"),
		"scraper": c.podPid(b, "scraper"),
	}
	counts := func() string {
		var out []string
		for _, name := range []string{"client", "other", "scraper"} {
			ok := 0
			const attempts = 4
			for range attempts {
				if conn, err := dialFrom(from[name], target, 300*time.Millisecond); err == nil {
					ok++
					conn.Close()
				}
			}
			out = append(out, fmt.Sprintf("%s %d/%d", name, ok, attempts))
		}
		return strings.Join(out, ", ")
	}
	expect := func(step, want string) {
		t.Helper()
		testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
			if got := counts(); got != want {
				return fmt.Errorf("%s: connections %s; want %s", step, got, want)
			}
			return nil
		})
		t.Logf("%s: %s", step, want)
	}
	expect("no policy", "client 4/4, other 4/4, scraper 4/4")
	wantAttachMode(t, a, policy.FilterPrefix, 4) // web's and other's veths, both sides

	kept, err := dialFrom(from["client"], target, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	keptReader := bufio.NewReader(kept)
	stillServes := func(step string) {
		t.Helper()
		kept.SetDeadline(time.Now().Add(3 * time.Second))
		fmt.Fprintf(kept, "GET / HTTP/1.1\r\nHost: web\r\n\r\n")
		resp, err := http.ReadResponse(keptReader, nil)
		if err != nil {
			t.Fatalf("%s: the established connection broke: %v", step, err)
		}
		resp.Body.Close()
	}
	stillServes("before policies")

	pinA := netpol.DefaultPinDir(a.Name)
	webIP := netip.MustParseAddr(web.Status.PodIP)
	inForce := c.applyTimed(t, pinA, func(s policy.State) bool { return s.Endpoints[webIP].Ingress }, `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny}
spec: {podSelector: {}}`)
	t.Logf("default deny in the node's map %v after the write", inForce)
	expect("default deny", "client 0/4, other 0/4, scraper 0/4")
	stillServes("default deny")

	clientIP := netip.MustParseAddr(client.Status.PodIP)
	inForce = c.applyTimed(t, pinA, func(s policy.State) bool {
		_, ok := s.Rules[policy.RuleKey{Pod: webIP, Dir: policy.Ingress, Peer: netip.PrefixFrom(clientIP, 32)}]
		return ok
	}, `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-from-clients}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress: [{from: [{podSelector: {matchLabels: {app: client}}}], ports: [{port: 8080}]}]`)
	t.Logf("podSelector allow in the node's map %v after the write", inForce)
	expect("allow podSelector app=client", "client 4/4, other 0/4, scraper 0/4")
	stillServes("allow podSelector")

	c.apply(`
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-from-mon}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {team: mon}}}]}]`)
	expect("allow namespaceSelector team=mon", "client 4/4, other 0/4, scraper 4/4")

	c.apply(`
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: clients-no-egress}
spec:
  podSelector: {matchLabels: {app: client}}
  policyTypes: [Egress]`)
	expect("egress deny on app=client", "client 0/4, other 0/4, scraper 4/4")
	stillServes("egress deny (tracked before it)")

	a.Stop()
	expect("node A's agent stopped", "client 0/4, other 0/4, scraper 4/4")
	restarted := time.Now()
	a.Start()
	a.WaitRenewed(restarted, 60*time.Second)
	expect("node A's agent restarted", "client 0/4, other 0/4, scraper 4/4")
	wantAttachMode(t, a, policy.FilterPrefix, 4) // re-attached in place, not stacked
	stillServes("agent restarted")

	s, err := policy.ReadPinned(pinA)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s: %d isolated pods, %d rules, counters %+v", a.Name, len(s.Endpoints), len(s.Rules), s.Stats)
	if s.Stats.Denied == 0 || s.Stats.Allowed == 0 {
		t.Errorf("counters on %s: %+v; want denials and allowances", a.Name, s.Stats)
	}

	for _, name := range []string{"default-deny", "web-from-clients", "web-from-mon", "clients-no-egress"} {
		c.delete(t, "default", name)
	}
	expect("policies removed", "client 4/4, other 4/4, scraper 4/4")
	stillServes("policies removed")
	testutil.Eventually(t, 5*time.Second, 50*time.Millisecond, func() error {
		s, err := policy.ReadPinned(pinA)
		if err != nil || len(s.Endpoints)+len(s.Rules) != 0 {
			return fmt.Errorf("maps after removal: %v %d endpoints %d rules", err, len(s.Endpoints), len(s.Rules))
		}
		return nil
	})
	// The kubelet's probes (from the node) were admitted throughout: web stayed Ready.
	c.waitPods("app=web", 1, 5*time.Second, nil)
}

// wantAttachMode checks that node n carries its programs named with prefix the way the agents
// were told to attach them: legacyFilters legacy tc filters under SKIFF_TEST_TC_LEGACY=1
// (inherited by the agents), else tcx links and no filter.
func wantAttachMode(t *testing.T, n *netnscluster.Node, prefix string, legacyFilters int) {
	t.Helper()
	var found []tcattach.Found
	err := inNetns("/run/netns/"+n.Netns, func() (err error) {
		found, err = tcattach.FindFilters(prefix)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	legacy := os.Getenv(tcattach.ForceLegacyEnv) == "1"
	if legacy && len(found) != legacyFilters || !legacy && len(found) != 0 {
		t.Fatalf("node %s: %d legacy tc filters %s* (legacy mode %v): %+v", n.Name, len(found), prefix, legacy, found)
	}
	t.Logf("node %s: %d legacy tc filters %s* (legacy mode %v)", n.Name, len(found), prefix, legacy)
}

// inNetns runs fn on a thread inside the network namespace at path.
func inNetns(path string, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	target, err := netns.GetFromPath(path)
	if err != nil {
		return err
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return err
	}
	err = fn()
	if serr := netns.Set(orig); serr != nil {
		panic("cannot return to the test's netns: " + serr.Error()) // this thread must not run anything else
	}
	return err
}

// tryApply creates the manifest's objects, returning the first error.
func (c *cluster) tryApply(manifest string) error {
	docs, err := schemas.DecodeManifests([]byte(manifest))
	if err != nil {
		return err
	}
	for _, d := range docs {
		if _, err := c.client().Create(context.Background(), d.Object); err != nil {
			return err
		}
	}
	return nil
}

// podPid is the pid of a running container of the named pod on node n (its netns is the pod's).
func (c *cluster) podPid(n *netnscluster.Node, pod string) uint32 {
	c.t.Helper()
	var pid uint32
	testutil.Eventually(c.t, 30*time.Second, 100*time.Millisecond, func() error {
		cs, err := n.Running(context.Background())
		if err != nil {
			return err
		}
		for _, ct := range cs {
			if ct.PodName == pod {
				pid = ct.Pid
				return nil
			}
		}
		return fmt.Errorf("no running container of %s on %s", pod, n.Name)
	})
	return pid
}

// dialFrom opens a TCP connection from inside the network namespace of process pid: the
// socket is the pod's, its packets leave through the pod's veth.
func dialFrom(pid uint32, addr string, timeout time.Duration) (conn net.Conn, err error) {
	nerr := inNetns(fmt.Sprintf("/proc/%d/ns/net", pid), func() error {
		d := net.Dialer{Timeout: timeout}
		conn, err = d.Dial("tcp", addr)
		return nil
	})
	if nerr != nil {
		return nil, nerr
	}
	return conn, err
}

// applyTimed creates the manifest and returns how long after the create returned the
// node's pinned maps satisfied done.
func (c *cluster) applyTimed(t *testing.T, pinDir string, done func(policy.State) bool, manifest string) time.Duration {
	t.Helper()
	c.apply(manifest)
	start := time.Now()
	for {
		s, err := policy.ReadPinned(pinDir)
		if err == nil && done(s) {
			return time.Since(start)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("policy not in the maps after 5s: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
}

func (c *cluster) delete(t *testing.T, ns, name string) {
	t.Helper()
	k, _ := schemas.ByResource("networking.k8s.io", "v1", "networkpolicies")
	if err := c.client().Delete(context.Background(), k, ns, name, nil); err != nil {
		t.Fatal(err)
	}
}
