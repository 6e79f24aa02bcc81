package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/scheduler"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

func node(name, cpu string, taints ...corev1.Taint) *corev1.Node {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Capacity: alloc, Allocatable: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

// addNode registers a node the way a kubelet does: create, then report status.
func addNode(t *testing.T, cp *controlplane.ControlPlane, n *corev1.Node) {
	t.Helper()
	created, err := cp.Client.Create(context.Background(), n.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	withStatus := created.(*corev1.Node)
	withStatus.Status = n.Status
	if _, err := cp.Client.UpdateStatus(context.Background(), withStatus); err != nil {
		t.Fatal(err)
	}
}

func pod(name, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
	}
}

// startWithScheduler runs a control plane with only the apiserver, and a scheduler on its
// shared informers that counts every successful bind.
func startWithScheduler(t *testing.T, components ...string) (*controlplane.ControlPlane, *bindCounter) {
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) { c.Components = append([]string{"apiserver"}, components...) })
	binds := &bindCounter{seen: map[string]int{}}
	if _, err := cp.Actors.Spawn(testScheduler, scheduler.NewActor(scheduler.Config{Informers: cp.Informers, Client: cp.Client, OnBind: binds.add})); err != nil {
		t.Fatal(err)
	}
	return cp, binds
}

const testScheduler = "test-scheduler"

type bindCounter struct {
	mu   sync.Mutex
	seen map[string]int
}

func (b *bindCounter) add(pod, _ string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen[pod]++
}

func (b *bindCounter) twice() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for p, n := range b.seen {
		if n > 1 {
			out = append(out, p)
		}
	}
	return out
}

func podsKind() *schemas.Kind { k, _ := schemas.ByResource("", "v1", "pods"); return k }

func boundCount(t *testing.T, cp *controlplane.ControlPlane) (int, map[string]int) {
	objs, _, err := cp.Client.List(context.Background(), podsKind(), "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	perNode := map[string]int{}
	n := 0
	for _, o := range objs {
		if p := o.(*corev1.Pod); p.Spec.NodeName != "" {
			n++
			perNode[p.Spec.NodeName]++
		}
	}
	return n, perNode
}

func TestSchedulerBindsAndExplainsWhatDoesNotFit(t *testing.T) {
	cp, _ := startWithScheduler(t)
	ctx := context.Background()
	taint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	for _, n := range []*corev1.Node{node("a", "1"), node("b", "1"), node("c", "4", taint)} {
		addNode(t, cp, n)
	}
	for i := range 4 {
		if _, err := cp.Client.Create(ctx, pod(fmt.Sprintf("p%d", i), "400m")); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		n, per := boundCount(t, cp)
		if n != 4 {
			return fmt.Errorf("%d of 4 bound: %v", n, per)
		}
		if per["c"] != 0 || per["a"] != 2 || per["b"] != 2 {
			return fmt.Errorf("placement ignores the taint or capacity: %v", per)
		}
		return nil
	})
	if _, err := cp.Client.Create(ctx, pod("big", "900m")); err != nil {
		t.Fatal(err)
	}
	waitUnschedulable(t, cp, "big", "0/3 nodes are available: 2 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}.")
	evKind, _ := schemas.ByResource("", "v1", "events")
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		evs, _, err := cp.Client.List(ctx, evKind, "default", nil)
		if err != nil {
			return err
		}
		for _, e := range evs {
			ev := e.(*corev1.Event)
			if ev.InvolvedObject.Name == "big" && ev.Reason == "FailedScheduling" && strings.Contains(ev.Message, "Insufficient cpu") {
				return nil
			}
		}
		return fmt.Errorf("no FailedScheduling event among %d", len(evs))
	})
	// Capacity arrives: the waiting pod is placed without any new pod event.
	addNode(t, cp, node("d", "2"))
	waitBoundTo(t, cp, "big", "d")
}

// waitUnschedulable waits for the pod's PodScheduled=False condition and checks its message.
func waitUnschedulable(t *testing.T, cp *controlplane.ControlPlane, name, want string) {
	t.Helper()
	waitUnschedulableMsg(t, cp, name, want, func(msg string) bool { return msg == want })
}

// waitUnschedulableMsg waits for a PodScheduled=False condition whose message ok accepts.
func waitUnschedulableMsg(t *testing.T, cp *controlplane.ControlPlane, name, want string, ok func(msg string) bool) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		o, err := cp.Client.Get(context.Background(), podsKind(), "default", name)
		if err != nil {
			return err
		}
		for _, c := range o.(*corev1.Pod).Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				if !ok(c.Message) {
					return fmt.Errorf("condition message %q, want %q", c.Message, want)
				}
				return nil
			}
		}
		return fmt.Errorf("no PodScheduled=False condition yet")
	})
}

// waitBoundTo waits until the pod is bound to node.
func waitBoundTo(t *testing.T, cp *controlplane.ControlPlane, name, node string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		o, err := cp.Client.Get(context.Background(), podsKind(), "default", name)
		if err != nil {
			return err
		}
		if n := o.(*corev1.Pod).Spec.NodeName; n != node {
			return fmt.Errorf("%s is on %q, want %q", name, n, node)
		}
		return nil
	})
}

// scheduledEvents counts the Scheduled Events written so far.
func scheduledEvents(t *testing.T, cp *controlplane.ControlPlane) int {
	evKind, _ := schemas.ByResource("", "v1", "events")
	evs, _, err := cp.Client.List(context.Background(), evKind, "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if ev := e.(*corev1.Event); ev.Reason == "Scheduled" && ev.Source.Component == scheduler.Name {
			n++
		}
	}
	return n
}

// Events are written at the scheduler's event rate, as kube-scheduler's event client is
// bound by its QPS and burst: binds run ahead of them, and the backlog writes them all later.
func TestScheduledEventsAreWrittenAtTheEventRate(t *testing.T) {
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) { c.Components = []string{"apiserver"} })
	addNode(t, cp, node("a", "4"))
	const pods, qps, burst = 30, 5, 2
	began := time.Now()
	if _, err := cp.Actors.Spawn(testScheduler, scheduler.NewActor(scheduler.Config{Informers: cp.Informers, Client: cp.Client,
		EventQPS: qps, EventBurst: burst})); err != nil {
		t.Fatal(err)
	}
	for i := range pods {
		if _, err := cp.Client.Create(context.Background(), pod(fmt.Sprintf("p%d", i), "10m")); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n, _ := boundCount(t, cp); n != pods {
			return fmt.Errorf("%d of %d bound", n, pods)
		}
		return nil
	})
	// Counted after the elapsed time is taken: a slow count only lowers the allowance's margin.
	allowed := burst + int(qps*time.Since(began).Seconds()) + 1
	if n := scheduledEvents(t, cp); n > allowed {
		t.Fatalf("%d Scheduled events written %v after the scheduler started, want at most %d (burst %d, %d/s)",
			n, time.Since(began).Round(time.Millisecond), allowed, burst, qps)
	}
	testutil.Eventually(t, 15*time.Second, 50*time.Millisecond, func() error {
		if n := scheduledEvents(t, cp); n != pods {
			return fmt.Errorf("%d of %d Scheduled events written", n, pods)
		}
		return nil
	})
}
