package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

// A node cut off the network is marked NotReady and its pods are replaced elsewhere; when it
// comes back it turns Ready again and stops the pods that were replaced, so no pod runs twice:
// every running pod container belongs to exactly one live pod object, on the node it is bound to.
func TestNetnsPartitionedNode(t *testing.T) {
	o := faultOptions
	c, cut := startWeb(t)

	start := time.Now()
	if err := cut.Partition(); err != nil {
		t.Fatal(err)
	}
	healed := false
	t.Cleanup(func() {
		if !healed {
			_ = cut.Heal()
		}
	})
	cut.WaitReady(false, o.NodeGracePeriod+10*time.Second)
	notReady := elapsed(start)
	c.waitPods("app=web", 2, o.NodeGracePeriod+o.PodEvictionTimeout+20*time.Second, notOnNode(cut.Name))
	replaced := elapsed(start)
	// The cut-off node still runs its old pods: it cannot hear that they were deleted.
	if pl, err := c.placement(); err != nil {
		t.Fatal(err)
	} else if len(pl) <= 2 {
		t.Logf("note: only %d pods running during the partition: %v", len(pl), pl)
	}

	if err := cut.Heal(); err != nil {
		t.Fatal(err)
	}
	healed = true
	healAt := time.Now()
	cut.WaitReady(true, 30*time.Second)
	readyAgain := elapsed(healAt)
	testutil.Eventually(t, 30*time.Second, 200*time.Millisecond, c.runsOnce)
	converged := elapsed(healAt)
	t.Logf("partitioned %s: NotReady after %v, pods replaced after %v; healed: Ready after %v, every pod running exactly once after %v",
		cut.Name, notReady, replaced, readyAgain, converged)
}

// runsOnce checks the containers every node's containerd runs against the API: each running
// pod is a live pod object bound to that node, on no other node, and the Deployment's two
// replicas are all that runs.
func (c *cluster) runsOnce() error {
	pl, err := c.placement()
	if err != nil {
		return err
	}
	pods, err := c.pods("app=web")
	if err != nil {
		return err
	}
	live := map[string]*corev1.Pod{}
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			live[string(p.UID)] = p
		}
	}
	for uid, nodes := range pl {
		if len(nodes) != 1 {
			return fmt.Errorf("pod %s runs on %v", uid, nodes)
		}
		p, ok := live[uid]
		if !ok {
			return fmt.Errorf("pod %s still runs on %s but is deleted", uid, nodes[0])
		}
		if p.Spec.NodeName != nodes[0] {
			return fmt.Errorf("pod %s runs on %s but is bound to %s", p.Name, nodes[0], p.Spec.NodeName)
		}
	}
	if len(pl) != 2 {
		return fmt.Errorf("%d pods running, want 2: %v", len(pl), pl)
	}
	return nil
}
