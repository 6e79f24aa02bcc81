package framework

import (
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func cpuOn(t *testing.T, s *Snapshot, name string) int64 {
	t.Helper()
	ni := s.Get(name)
	if ni == nil {
		t.Fatalf("node %s not in snapshot", name)
	}
	return ni.Requested().MilliCPU
}

func bound(p *v1.Pod, node string) *v1.Pod {
	cp := p.DeepCopy()
	cp.Spec.NodeName = node
	return cp
}

func TestAssumeConfirmForget(t *testing.T) {
	c := NewCache()
	c.UpsertNode(node("a", "1", "1Gi"))
	c.UpsertNode(node("b", "1", "1Gi"))
	p := pod("p", "300m", "")

	if err := c.Assume(p, "a"); err != nil {
		t.Fatal(err)
	}
	if got := cpuOn(t, c.Snapshot(), "a"); got != 300 {
		t.Fatalf("assumed pod not counted: %dm", got)
	}
	if err := c.Assume(p, "b"); err == nil {
		t.Fatal("assumed the same pod twice")
	}
	c.AddPod(bound(p, "a")) // the bind arrives: confirmed, not added again
	if got := cpuOn(t, c.Snapshot(), "a"); got != 300 {
		t.Fatalf("confirmed pod counted %dm, want 300m", got)
	}
	c.UpdatePod(bound(p, "a"), bound(p, "a")) // a duplicate event changes nothing
	if _, pods, assumed := c.Counts(); pods != 1 || assumed != 0 {
		t.Fatalf("pods %d assumed %d, want 1 and 0", pods, assumed)
	}
	c.Forget(p) // too late: the pod is bound
	if got := cpuOn(t, c.Snapshot(), "a"); got != 300 {
		t.Fatalf("Forget dropped a bound pod")
	}

	q := pod("q", "200m", "")
	if err := c.Assume(q, "a"); err != nil {
		t.Fatal(err)
	}
	c.Forget(q)
	if got := cpuOn(t, c.Snapshot(), "a"); got != 300 {
		t.Fatalf("after Forget: %dm, want 300m", got)
	}

	// Someone else bound it to another node: the truth replaces the assumption.
	r := pod("r", "100m", "")
	if err := c.Assume(r, "a"); err != nil {
		t.Fatal(err)
	}
	c.AddPod(bound(r, "b"))
	s := c.Snapshot()
	if cpuOn(t, s, "a") != 300 || cpuOn(t, s, "b") != 100 {
		t.Fatalf("a %dm b %dm, want 300m and 100m", cpuOn(t, s, "a"), cpuOn(t, s, "b"))
	}
	// An update of the still-unbound pod object keeps an assumption.
	u := pod("u", "100m", "")
	if err := c.Assume(u, "b"); err != nil {
		t.Fatal(err)
	}
	c.UpdatePod(u, u)
	if got := cpuOn(t, c.Snapshot(), "b"); got != 200 {
		t.Fatalf("assumption lost on an unbound update: %dm", got)
	}
}

func TestAssumeRejects(t *testing.T) {
	c := NewCache()
	c.UpsertNode(node("a", "1", "1Gi"))
	if err := c.Assume(pod("p", "", ""), "nope"); err == nil {
		t.Fatal("assumed onto an unknown node")
	}
	if err := c.Assume(pod("big", "2", ""), "a"); !errors.Is(err, ErrNoLongerFits) {
		t.Fatalf("want ErrNoLongerFits, got %v", err)
	}
	c.AddPod(pod("x", "", "", on("a"), hostPortOf(80, "")))
	if err := c.Assume(pod("p", "", "", hostPortOf(80, "")), "a"); !errors.Is(err, ErrNoLongerFits) {
		t.Fatalf("host port clash: want ErrNoLongerFits, got %v", err)
	}
}

// assumed is a cache with a 10 s TTL on the clock *now, with pod p (500m) assumed on node a.
func assumed(t *testing.T) (c *Cache, now *time.Time, p *v1.Pod) {
	c = NewCache()
	now = new(time.Time)
	*now = time.Unix(1000, 0)
	c.now = func() time.Time { return *now }
	c.SetAssumeTTL(10 * time.Second)
	c.UpsertNode(node("a", "1", "1Gi"))
	p = pod("p", "500m", "")
	if err := c.Assume(p, "a"); err != nil {
		t.Fatal(err)
	}
	return c, now, p
}

func TestAssumptionsExpire(t *testing.T) {
	c, now, p := assumed(t)
	*now = now.Add(9 * time.Second)
	if got := cpuOn(t, c.Snapshot(), "a"); got != 500 {
		t.Fatalf("expired too early: %dm", got)
	}
	*now = now.Add(2 * time.Second)
	if got := cpuOn(t, c.Snapshot(), "a"); got != 0 {
		t.Fatalf("not expired after the TTL: %dm", got)
	}
	c.AddPod(bound(p, "a")) // a late confirmation counts once
	if got := cpuOn(t, c.Snapshot(), "a"); got != 500 {
		t.Fatalf("late confirmation: %dm", got)
	}
	*now = now.Add(time.Hour)
	if got := cpuOn(t, c.Snapshot(), "a"); got != 500 {
		t.Fatalf("a bound pod expired: %dm", got)
	}
}

func TestRenewKeepsAnAssumption(t *testing.T) {
	c, now, p := assumed(t)
	*now = now.Add(9 * time.Second)
	c.Renew(p)
	*now = now.Add(9 * time.Second) // 18 s after Assume, 9 s after Renew
	if got := cpuOn(t, c.Snapshot(), "a"); got != 500 {
		t.Fatalf("a renewed assumption expired: %dm", got)
	}
	*now = now.Add(2 * time.Second)
	if got := cpuOn(t, c.Snapshot(), "a"); got != 0 {
		t.Fatalf("not expired a TTL after the renewal: %dm", got)
	}
}

func TestPodLifecycle(t *testing.T) {
	c := NewCache()
	c.AddPod(pod("early", "100m", "", on("a"))) // before its node
	c.UpsertNode(node("a", "1", "1Gi"))
	if got := cpuOn(t, c.Snapshot(), "a"); got != 100 {
		t.Fatalf("pod that came before its node: %dm", got)
	}
	p := pod("p", "200m", "", on("a"))
	c.AddPod(p)
	done := p.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	c.UpdatePod(p, done)
	if got := cpuOn(t, c.Snapshot(), "a"); got != 100 {
		t.Fatalf("terminal pod still counted: %dm", got)
	}
	c.RemovePod(pod("early", "100m", "", on("a")))
	if got := cpuOn(t, c.Snapshot(), "a"); got != 0 {
		t.Fatalf("removed pod still counted: %dm", got)
	}
	// A deleted node stops being a candidate but keeps its pods for when it returns.
	c.AddPod(pod("q", "300m", "", on("a")))
	c.DeleteNode("a")
	if n := c.Snapshot().NumNodes(); n != 0 {
		t.Fatalf("deleted node still listed (%d nodes)", n)
	}
	c.UpsertNode(node("a", "1", "1Gi"))
	if got := cpuOn(t, c.Snapshot(), "a"); got != 300 {
		t.Fatalf("node came back with %dm, want 300m", got)
	}
}

func TestSnapshotsAreIsolated(t *testing.T) {
	c := NewCache()
	for i := 0; i < 200; i++ {
		c.UpsertNode(node(nodeNameN(i), "1", "1Gi"))
	}
	s1 := c.Snapshot()
	if c.Snapshot() != s1 {
		t.Fatal("an unchanged cache built a new snapshot")
	}
	c.AddPod(pod("p", "100m", "", on(nodeNameN(3))))
	for i := 0; i < 200; i += 3 {
		c.DeleteNode(nodeNameN(i))
	}
	c.UpsertNode(node("extra", "1", "1Gi"))
	s2 := c.Snapshot()
	if s1.NumNodes() != 200 || cpuOn(t, s1, nodeNameN(3)) != 0 || s1.Get(nodeNameN(0)) == nil {
		t.Fatal("a later change leaked into an old snapshot")
	}
	want := map[string]bool{"extra": true}
	for i := 0; i < 200; i++ {
		if i%3 != 0 {
			want[nodeNameN(i)] = true
		}
	}
	got := map[string]bool{}
	for _, ni := range s2.NodeInfos() {
		got[ni.Node().Name] = true
	}
	if len(got) != len(want) || s2.NumNodes() != len(want) {
		t.Fatalf("snapshot has %d nodes (%d distinct), want %d", s2.NumNodes(), len(got), len(want))
	}
	for n := range want {
		if !got[n] {
			t.Fatalf("node %s missing", n)
		}
	}
	if s2.Get(nodeNameN(3)) != nil {
		t.Fatal("deleted node listed")
	}
}
