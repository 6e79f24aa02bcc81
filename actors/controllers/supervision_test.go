package controllers_test

import (
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/daemonset"
	"github.com/skiff-sh/skiff/actors/controllers/deployment"
	"github.com/skiff-sh/skiff/actors/controllers/endpointslice"
	"github.com/skiff-sh/skiff/actors/controllers/garbagecollector"
	"github.com/skiff-sh/skiff/actors/controllers/nodelifecycle"
	"github.com/skiff-sh/skiff/actors/controllers/replicaset"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/actors/simnode"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// A panic in any controller's event handler restarts that controller alone (a child of the
// controller manager), the process and the other controllers carry on, and the work the lost
// event stood for still gets done, exactly once.
func TestAPanicInAnyControllersEventHandlerRestartsJustThatController(t *testing.T) {
	cp := startWithFastRestarts(t)
	ctx := ct.Ctx(t)
	ct.Wait(t, func() error {
		if n := len(informer.Shared[*corev1.Node](cp.Informers, "", "nodes").List()); n != 2 {
			return ct.Errorf("%d nodes", n)
		}
		return nil
	})

	names := map[string]string{ // actor name -> controller name (its fault points)
		controllers.Deployment: deployment.Name, controllers.ReplicaSet: replicaset.Name, controllers.GarbageCollector: garbagecollector.Name,
		controllers.NodeLifecycle: nodelifecycle.Name, controllers.EndpointSlice: endpointslice.Name, controllers.DaemonSet: daemonset.Name,
	}
	for _, name := range names {
		actorkit.InjectPanic(controllerkit.FaultEvent(name), 1)
	}

	// Every controller has events to handle: a Deployment's ReplicaSet and pods, a Service over
	// them, the nodes' heartbeats.
	var mu sync.Mutex
	var created []string
	pods := informer.Shared[*corev1.Pod](cp.Informers, "", "pods")
	remove := pods.AddHandler(informer.TypedFuncs[*corev1.Pod]{Add: func(p *corev1.Pod) {
		if p.Labels["app"] == "crashy" {
			mu.Lock()
			created = append(created, p.Name)
			mu.Unlock()
		}
	}})
	defer remove()
	if _, err := cp.Client.Create(ctx, ct.Deployment("crashy", "crashy", 3)); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "crashy", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "crashy"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := cp.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}

	ct.Wait(t, func() error {
		for actorName, name := range names {
			if left := actorkit.Armed(controllerkit.FaultEvent(name)); left > 0 {
				return ct.Errorf("%s has not handled an event yet", name)
			}
			if n := cp.Actors.Health().Restarts(controllers.Manager + "/" + actorName); n != 1 {
				return ct.Errorf("%s restarted %d times, want 1", actorName, n)
			}
		}
		return nil
	})
	if n := cp.Actors.Health().Restarts(controllers.Manager); n != 0 {
		t.Fatalf("the controller manager restarted %d times: a controller's failure must stay its own", n)
	}

	// The work goes on: three pods, ready, behind the Service's endpoints.
	ct.Wait(t, func() error {
		running := ct.Active(ct.ListPods(t, cp, "default", "app=crashy"))
		if len(running) != 3 || ct.CountReady(running) != 3 {
			return ct.Errorf("%d pods, %d ready", len(running), ct.CountReady(running))
		}
		objs, _, err := cp.Client.List(ctx, controllerkit.MustKind("discovery.k8s.io", "endpointslices"), "default",
			map[string][]string{"labelSelector": {discoveryv1.LabelServiceName + "=crashy"}})
		if err != nil {
			return err
		}
		ready := 0
		for _, o := range objs {
			ready += readyEndpoints(o)
		}
		if ready != 3 {
			return ct.Errorf("%d ready endpoints", ready)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(created) != 3 {
		t.Fatalf("pods created: %v; want exactly 3 (a restart must not create twice)", created)
	}
	if err := cp.Actors.Health().Check(); err != nil {
		t.Fatal(err)
	}
}

// startWithFastRestarts runs the whole control plane, restarting failed actors after 10 ms,
// with two simulated nodes.
func startWithFastRestarts(t *testing.T) *controlplane.ControlPlane {
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) {
		c.Bookmarks = 200 * time.Millisecond
		c.Supervision = actorkit.Policy{MaxRestarts: 5, Window: time.Minute, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	})
	ct.Spawn(t, cp, "simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Informers: cp.Informers, Nodes: 2}))
	return cp
}

func readyEndpoints(o runtime.Object) int {
	n := 0
	for _, e := range o.(*discoveryv1.EndpointSlice).Endpoints {
		if e.Conditions.Ready != nil && *e.Conditions.Ready {
			n++
		}
	}
	return n
}

// A panic inside a reconcile restarts only the worker that ran it, and its key is retried: the
// ReplicaSet still gets its pods, exactly as many as it asks for.
func TestAPanicInAReconcileRestartsJustThatWorker(t *testing.T) {
	cp := startWithFastRestarts(t)
	ctx := ct.Ctx(t)
	actorkit.InjectPanic(controllerkit.FaultReconcile(replicaset.Name), 1)
	if _, err := cp.Client.Create(ctx, ct.ReplicaSet("flaky", "flaky", 3)); err != nil {
		t.Fatal(err)
	}
	ct.Wait(t, func() error {
		running := ct.Active(ct.ListPods(t, cp, "default", "app=flaky"))
		if len(running) != 3 || ct.CountReady(running) != 3 {
			return ct.Errorf("%d pods, %d ready", len(running), ct.CountReady(running))
		}
		return nil
	})
	h := cp.Actors.Health()
	rs := controllers.Manager + "/" + controllers.ReplicaSet
	if left := actorkit.Armed(controllerkit.FaultReconcile(replicaset.Name)); left != 0 {
		t.Fatalf("the fault point never fired (%d left)", left)
	}
	if n := h.Restarts(rs+"/worker-0") + h.Restarts(rs+"/worker-1"); n != 1 {
		t.Fatalf("worker restarts %d, want 1", n)
	}
	if n := h.Restarts(rs); n != 0 {
		t.Fatalf("the replicaset controller restarted %d times: a worker's failure must stay its own", n)
	}
	if pods := ct.ListPods(t, cp, "default", "app=flaky"); len(pods) != 3 {
		t.Fatalf("%d pods, want 3", len(pods))
	}
}
