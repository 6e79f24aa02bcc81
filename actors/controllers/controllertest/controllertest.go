// Package controllertest holds helpers for tests of controllers against a real control plane:
// starting one, spawning actors, a tiny round-robin binder (a stand-in for the scheduler), and
// builders for common objects.
package controllertest

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// Start runs a control plane with only the apiserver: the test spawns the actors it needs.
func Start(t testing.TB) *controlplane.ControlPlane {
	t.Helper()
	return testutil.StartControlPlane(t, func(c *controlplane.Config) {
		c.Bookmarks = 200 * time.Millisecond
		c.Components = []string{"apiserver"}
	})
}

// Spawn starts a supervised actor and stops it when the test ends.
func Spawn(t testing.TB, cp *controlplane.ControlPlane, name string, producer func() actorkit.Actor) *actorkit.PID {
	t.Helper()
	pid, err := cp.Actors.Spawn(name, producer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Actors.Stop(pid) })
	return pid
}

// Ctx is a context that ends with the test.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Wait polls f (every 20 ms, up to 30 s).
func Wait(t testing.TB, f func() error) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, 20*time.Millisecond, f)
}

// Binder binds pending pods round-robin to nodes that are Ready and carry no NoSchedule or
// NoExecute taint: the tests' stand-in for the scheduler. It runs until the test ends.
func Binder(t testing.TB, cp *controlplane.ControlPlane) {
	ctx, cancel := context.WithCancel(context.Background())
	pods := informer.For(cp.Log, "", "pods")
	nodes := informer.For(cp.Log, "", "nodes")
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); _ = pods.Run(ctx) }()
	go func() { defer wg.Done(); _ = nodes.Run(ctx) }()
	go func() {
		defer wg.Done()
		next := 0
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var ready []string
			for _, o := range nodes.List(nil) {
				if n := o.(*corev1.Node); Schedulable(n) {
					ready = append(ready, n.Name)
				}
			}
			if len(ready) == 0 {
				continue
			}
			for _, o := range pods.List(func(o runtime.Object) bool {
				p := o.(*corev1.Pod)
				return p.Spec.NodeName == "" && p.DeletionTimestamp == nil
			}) {
				p := o.(*corev1.Pod)
				node := ready[next%len(ready)]
				if cp.Client.Bind(ctx, p.Namespace, p.Name, node) == nil {
					next++
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// Schedulable: Ready, not cordoned, no NoSchedule/NoExecute taint.
func Schedulable(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, tn := range n.Spec.Taints {
		if tn.Effect == corev1.TaintEffectNoSchedule || tn.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Template is a pod template with label app=<app> running image.
func Template(app, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "app", Image: image, Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}},
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
		},
	}
}

// ReplicaSet builds a ReplicaSet of app.
func ReplicaSet(name, app string, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Template: Template(app, "img:1"),
		},
	}
}

// Deployment builds a Deployment of app.
func Deployment(name, app string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Template: Template(app, "img:1"),
		},
	}
}

// ListPods lists the pods of namespace ns matching a label selector ("" = all).
func ListPods(t testing.TB, cp *controlplane.ControlPlane, ns, selector string) []*corev1.Pod {
	t.Helper()
	q := url.Values{}
	if selector != "" {
		q.Set("labelSelector", selector)
	}
	objs, _, err := cp.Client.List(context.Background(), controllerkit.MustKind("", "pods"), ns, q)
	if err != nil {
		t.Fatal(err)
	}
	return controllerkit.Pods(objs)
}

// Active keeps the pods that count as replicas.
func Active(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if controllerkit.IsPodActive(p) {
			out = append(out, p)
		}
	}
	return out
}

// CountReady counts the active, Ready pods.
func CountReady(pods []*corev1.Pod) int {
	n := 0
	for _, p := range Active(pods) {
		if controllerkit.IsPodReady(p) {
			n++
		}
	}
	return n
}

// Get reads an object into out's type.
func Get[T runtime.Object](t testing.TB, cp *controlplane.ControlPlane, group, resource, ns, name string) T {
	t.Helper()
	o, err := cp.Client.Get(context.Background(), controllerkit.MustKind(group, resource), ns, name)
	if err != nil {
		t.Fatalf("get %s %s/%s: %v", resource, ns, name, err)
	}
	return o.(T)
}

// Errorf is fmt.Errorf, for Wait conditions.
func Errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// TryGet reads an object, returning the error instead of failing the test.
func TryGet[T runtime.Object](cp *controlplane.ControlPlane, group, resource, ns, name string) (T, error) {
	var zero T
	o, err := cp.Client.Get(context.Background(), controllerkit.MustKind(group, resource), ns, name)
	if err != nil {
		return zero, err
	}
	return o.(T), nil
}

// WaitEvent waits for an Event in namespace default about object with the given reason,
// written by component.
func WaitEvent(t testing.TB, cp *controlplane.ControlPlane, object, reason, component string) {
	t.Helper()
	Wait(t, func() error {
		objs, _, err := cp.Client.List(context.Background(), controllerkit.MustKind("", "events"), "default", nil)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if e := o.(*corev1.Event); e.InvolvedObject.Name == object && e.Reason == reason && e.Source.Component == component {
				return nil
			}
		}
		return Errorf("no %s event for %s from %s", reason, object, component)
	})
}
