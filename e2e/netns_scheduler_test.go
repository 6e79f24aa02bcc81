package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/testkit/echoapp"
	"github.com/skiff-sh/skiff/testkit/netnscluster"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// Two `skiff server --components scheduler` replicas, leader-elected: kill -9 the leader and
// the standby takes over within one lease period, and a pod created meanwhile is scheduled
// onto a netns node and runs.
func TestNetnsSchedulerLeaderKilled(t *testing.T) {
	const lease = 2 * time.Second
	c := startCluster(t, netnscluster.Options{Nodes: 1, Components: []string{controlplane.APIServer, controlplane.ControllerManager}})
	leads := func(p *netnscluster.Proc) bool {
		return strings.Contains(p.Log(), "msg=leading lease="+controlplane.SchedulerLease+" ")
	}
	scheds := []*netnscluster.Proc{
		c.StartServer("sched-a", "--components", "scheduler", "--lease-duration", lease.String(), "--identity", "sched-a"),
		c.StartServer("sched-b", "--components", "scheduler", "--lease-duration", lease.String(), "--identity", "sched-b"),
	}
	var leader, standby *netnscluster.Proc
	testutil.Eventually(t, 60*time.Second, 50*time.Millisecond, func() error {
		a, b := leads(scheds[0]), leads(scheds[1])
		if a == b {
			return fmt.Errorf("scheduler leaders: sched-a %v, sched-b %v; want exactly one", a, b)
		}
		leader, standby = scheds[0], scheds[1]
		if b {
			leader, standby = scheds[1], scheds[0]
		}
		return nil
	})
	node := c.Nodes[0].Name
	c.apply(echoapp.ClientPod("before", node))
	c.waitPods("app=before", 1, 60*time.Second, nil)

	killed := time.Now()
	leader.Kill()
	c.apply(echoapp.ClientPod("after", node))
	testutil.Eventually(t, lease+10*time.Second, 20*time.Millisecond, func() error {
		if !leads(standby) {
			return fmt.Errorf("%s does not lead yet", standby.Name)
		}
		return nil
	})
	takeover := elapsed(killed)
	c.waitPods("app=after", 1, lease+30*time.Second, nil)
	t.Logf("scheduler leader %s killed: %s leads after %v (lease %v); the pod created meanwhile Ready on %s after %v",
		leader.Name, standby.Name, takeover, lease, node, elapsed(killed))
	// The standby takes over one lease period after it last saw the leader renew (every
	// lease/4), so at most lease + lease/4 after the kill; 1s more for a loaded machine.
	if bound := lease + lease/4 + time.Second; takeover > bound {
		t.Fatalf("takeover took %v, more than %v (lease %v)", takeover, bound, lease)
	}
}
