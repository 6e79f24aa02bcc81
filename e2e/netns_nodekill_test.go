package e2e

import (
	"testing"
	"time"
)

// kill -9 of a node agent and its containerd: the node goes NotReady after the grace period,
// its pods are evicted after the eviction timeout and replaced on the other node.
func TestNetnsNodeAgentKilled(t *testing.T) {
	o := faultOptions
	c, victim := startWeb(t)

	killed := time.Now()
	victim.Kill()
	victim.WaitReady(false, o.NodeGracePeriod+10*time.Second)
	notReady := elapsed(killed)
	// Bound: grace + eviction, plus the scheduling and start of the replacement (a few seconds).
	bound := o.NodeGracePeriod + o.PodEvictionTimeout + 10*time.Second
	c.waitPods("app=web", 2, bound+10*time.Second, notOnNode(victim.Name))
	recovered := elapsed(killed)
	t.Logf("agent of %s killed: NotReady after %v, its pods replaced and Ready elsewhere after %v (grace %v + eviction %v)",
		victim.Name, notReady, recovered, o.NodeGracePeriod, o.PodEvictionTimeout)
	if recovered > bound {
		t.Fatalf("replacement took %v, more than %v", recovered, bound)
	}
}
