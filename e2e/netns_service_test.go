package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/testkit/echoapp"
	"github.com/skiff-sh/skiff/testkit/netnscluster"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// Two nodes, each an agent in its own netns: a client pod on node B reaches a Service whose
// backends all run on node A, by ClusterIP (eBPF on B) and by pod IP (routes to A's pod CIDR);
// the backend sees the client pod's own address (no masquerade between pod networks); and every
// pod's processes run inside its node's cgroup2 subtree.
func TestNetnsServiceAcrossNodes(t *testing.T) {
	c := startCluster(t, netnscluster.Options{Nodes: 2})
	a, b := c.Nodes[0], c.Nodes[1]
	c.apply(echoDeployment("backend", 2, a.Name) + "---\n" + echoapp.ClientPod("client", b.Name))
	backends := c.waitPods("app=backend", 2, 90*time.Second, onNode(a.Name))
	client := c.waitPods("app=client", 1, 60*time.Second, onNode(b.Name))[0]
	vip := c.clusterIP("backend")

	start := time.Now()
	seen := map[string]int{}
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		e, err := c.get(client, "http://"+vip+":80/")
		if err != nil {
			return err
		}
		if host, _, _ := strings.Cut(e.Remote, ":"); host != client.Status.PodIP {
			return fmt.Errorf("backend %s saw the client as %s, want its pod IP %s", e.Pod, e.Remote, client.Status.PodIP)
		}
		seen[e.Pod]++
		if len(seen) < 2 {
			return fmt.Errorf("only %v answered so far", seen)
		}
		return nil
	})
	t.Logf("client on %s reached both backends on %s via ClusterIP %s within %v: %v", b.Name, a.Name, vip, elapsed(start), seen)
	for _, p := range backends {
		if _, err := c.get(client, "http://"+p.Status.PodIP+":8080/"); err != nil {
			t.Fatalf("pod IP across nodes: %v", err)
		}
	}

	// Each node's pods are in its own cgroup2 subtree (where its Service hooks are attached),
	// not in another node's and not in the host's root.
	for _, n := range c.Nodes {
		cs, err := n.Running(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 0 {
			t.Fatalf("no running containers on %s", n.Name)
		}
		for _, ct := range cs {
			cg, err := netnscluster.CgroupOf(ct.Pid)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(cg, "/"+n.Namespace+"/pod") {
				t.Errorf("pod %s (pid %d) on %s is in cgroup %s, outside the node's subtree /%s", ct.PodName, ct.Pid, n.Name, cg, n.Namespace)
			}
		}
	}
}
