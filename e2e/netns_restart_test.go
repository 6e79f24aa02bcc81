package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/echoapp"
	"github.com/skiff-sh/skiff/testkit/netnscluster"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// Restart everything (every agent, the control plane and its NATS server, same data dirs):
// every object comes back at the same resourceVersion, the agents adopt the running
// containers (same pids, no restarts), and the Service still answers across nodes.
func TestNetnsRestartEverything(t *testing.T) {
	// A grace period longer than the restart: no node may be marked NotReady meanwhile.
	c := startCluster(t, netnscluster.Options{Nodes: 2, NodeGracePeriod: 60 * time.Second})
	a, b := c.Nodes[0], c.Nodes[1]
	c.apply(echoDeployment("backend", 2, a.Name) + "---\n" + echoapp.ClientPod("client", b.Name))
	c.waitPods("app=backend", 2, 90*time.Second, nil)
	client := c.waitPods("app=client", 1, 60*time.Second, nil)[0]
	vip := c.clusterIP("backend")
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error { _, err := c.get(client, "http://"+vip+"/"); return err })
	// The controllers' status writes settle before the snapshot: a ReplicaSet batches its
	// count updates, and one still pending at the stop is written after the restart.
	c.waitDeploymentAvailable("backend", 2)

	before := c.versions()
	pids := c.pids()
	start := time.Now()
	for _, n := range c.Nodes {
		n.Stop()
	}
	c.StopControlPlane()
	c.StartControlPlane()
	after := c.versions()
	for key, rv := range before {
		if after[key] != rv {
			t.Errorf("%s: resourceVersion %s before the restart, %q after", key, rv, after[key])
		}
	}
	if len(after) != len(before) {
		t.Errorf("%d objects before the restart, %d after", len(before), len(after))
	}
	restarted := time.Now()
	for _, n := range c.Nodes {
		n.Start()
	}
	for _, n := range c.Nodes {
		n.WaitRenewed(restarted, 60*time.Second)
		n.WaitReady(true, 10*time.Second)
	}
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error { _, err := c.get(client, "http://"+vip+"/"); return err })
	t.Logf("restart of the control plane and %d agents: %d objects intact, Service answering again after %v", len(c.Nodes), len(before), elapsed(start))
	if got := c.pids(); fmt.Sprint(got) != fmt.Sprint(pids) {
		t.Errorf("containers not adopted: pids %v before, %v after", pids, got)
	}
	for _, p := range c.waitPods("app in (backend, client)", 3, 30*time.Second, nil) {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount != 0 {
				t.Errorf("pod %s container %s restarted %d times", p.Name, cs.Name, cs.RestartCount)
			}
		}
	}
}

// waitDeploymentAvailable waits until the Deployment's status, written from its ReplicaSets',
// reports want replicas updated, ready and available for its current generation.
func (c *cluster) waitDeploymentAvailable(name string, want int32) {
	c.t.Helper()
	k, _ := schemas.ByResource("apps", "v1", "deployments")
	testutil.Eventually(c.t, 30*time.Second, 100*time.Millisecond, func() error {
		obj, err := c.client().Get(context.Background(), k, "default", name)
		if err != nil {
			return err
		}
		d := obj.(*appsv1.Deployment)
		if st := d.Status; st.ObservedGeneration != d.Generation || st.Replicas != want || st.UpdatedReplicas != want || st.ReadyReplicas != want || st.AvailableReplicas != want {
			return fmt.Errorf("deployment %s: status %+v at generation %d, want %d replicas available", name, st, d.Generation, want)
		}
		return nil
	})
}

// versions maps every object of the workload kinds in default to its resourceVersion.
func (c *cluster) versions() map[string]string {
	c.t.Helper()
	out := map[string]string{}
	for _, r := range [][2]string{{"", "pods"}, {"", "services"}, {"apps", "deployments"}, {"apps", "replicasets"}, {"discovery.k8s.io", "endpointslices"}} {
		k, ok := schemas.ByResource(r[0], "v1", r[1])
		if !ok {
			c.t.Fatalf("no kind for %v", r)
		}
		objs, _, err := c.client().List(context.Background(), k, "default", nil)
		if err != nil {
			c.t.Fatal(err)
		}
		for _, o := range objs {
			m, _ := meta.Accessor(o)
			out[r[1]+"/"+m.GetName()] = m.GetResourceVersion()
		}
	}
	return out
}

// pids maps each running pod container to its process id, over all nodes.
func (c *cluster) pids() map[string]uint32 {
	c.t.Helper()
	out := map[string]uint32{}
	for _, n := range c.Nodes {
		cs, err := n.Running(context.Background())
		if err != nil {
			c.t.Fatal(err)
		}
		for _, ct := range cs {
			out[ct.ID] = ct.Pid
		}
	}
	return out
}
