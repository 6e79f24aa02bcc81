package apiserver

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/schemas"
)

// The field manager's three full runs per pod of a scaled Deployment, as the server makes
// them: the ReplicaSet controller's create, the scheduler's Scheduled event, the kubelet's
// first status write. A create runs as before (plain: trackUpdate over an empty live object)
// and through trackCreate's memo: pods of one template hit it, pods that differ (a label each)
// and events (each its own message) miss it, paying for the key on top of the plain run.
func BenchmarkTrackUpdate(b *testing.B) {
	pods, events := benchKind(b, "", "pods"), benchKind(b, "", "events")
	samePod := func(int) (runtime.Object, runtime.Object) { return nil, controllerPod() }
	unlikePod := func(i int) (runtime.Object, runtime.Object) {
		p := controllerPod()
		p.Labels["n"] = fmt.Sprint(i)
		return nil, p
	}
	event := func(i int) (runtime.Object, runtime.Object) { return nil, scheduledEvent(i) }
	for _, c := range []struct {
		name string
		k    *schemas.Kind
		mgr  string
		pair func(int) (runtime.Object, runtime.Object)
	}{{"pod-create", pods, "replicaset-controller", samePod}, {"pod-create-unlike", pods, "replicaset-controller", unlikePod},
		{"event-create", events, "default-scheduler", event}} {
		b.Run(c.name+"/plain", func(b *testing.B) {
			benchTrack(b, c.k, "", c.mgr, func(i int) (runtime.Object, runtime.Object) {
				_, next := c.pair(i)
				return newOf(c.k), next
			})
		})
		b.Run(c.name+"/memo", func(b *testing.B) { benchTrack(b, c.k, "", c.mgr, c.pair) })
	}
	created := trackUpdate(pods, "", newOf(pods), controllerPod(), writeOptions{fieldManager: "replicaset-controller"}).(*corev1.Pod)
	created.Spec.NodeName = "sim-0042"
	b.Run("pod-status-first", func(b *testing.B) {
		benchTrack(b, pods, "status", "skiff-node", func(int) (runtime.Object, runtime.Object) {
			next := created.DeepCopy()
			runningStatus(next)
			return created.DeepCopy(), next
		})
	})
}

func benchKind(b *testing.B, group, resource string) *schemas.Kind {
	b.Helper()
	k, ok := schemas.ByResource(group, "v1", resource)
	if !ok {
		b.Fatalf("no kind %s", resource)
	}
	return k
}

// benchTrack times trackUpdate over b.N pairs made beforehand (it writes into next), or
// trackCreate where a pair has no live object; CPU time too, the machine being shared.
func benchTrack(b *testing.B, k *schemas.Kind, sub, manager string, pair func(int) (runtime.Object, runtime.Object)) {
	lives, nexts := make([]runtime.Object, b.N), make([]runtime.Object, b.N)
	for i := range lives {
		lives[i], nexts[i] = pair(i)
	}
	wo := writeOptions{fieldManager: manager}
	b.ReportAllocs()
	b.ResetTimer()
	before := cpuTime()
	for i := range lives {
		var out runtime.Object
		if lives[i] == nil {
			out = trackCreate(k, nexts[i], wo)
		} else {
			out = trackUpdate(k, sub, lives[i], nexts[i], wo)
		}
		if len(mustMeta(out).GetManagedFields()) == 0 {
			b.Fatal("no managed fields recorded")
		}
	}
	reportCPU(b, before)
}

// controllerPod is a Deployment's pod as the ReplicaSet controller creates it, defaulted.
func controllerPod() *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-7d9f8b6c5d-x2k9p", GenerateName: "web-7d9f8b6c5d-", Namespace: "default",
			UID: "0b7c3f1e-6a4d-4f7e-9c2b-000000000001", CreationTimestamp: metav1.Now(),
			Labels: map[string]string{"app": "web", "pod-template-hash": "7d9f8b6c5d"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8b6c5d",
				UID: "5f0c2b1a-2c3d-4e5f-8a9b-0c1d2e3f4a5b", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "web", Image: "registry.example/web:1.4.2",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			Env:   []corev1.EnvVar{{Name: "MODE", Value: "prod"}, {Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
			},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
		}}},
	}
	schemas.Default(p)
	return p
}

// scheduledEvent is the scheduler's event for pod i's placement.
func scheduledEvent(i int) *corev1.Event {
	now := metav1.Now()
	name := fmt.Sprintf("web-7d9f8b6c5d-%05d", i)
	e := &corev1.Event{
		TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:     metav1.ObjectMeta{Name: name + ".18a2b3c4d5e6f7a8", Namespace: "default", UID: types.UID(fmt.Sprintf("e-%d", i)), CreationTimestamp: now},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: name, UID: "0b7c3f1e-6a4d-4f7e-9c2b-000000000001", APIVersion: "v1", ResourceVersion: "1234"},
		Reason:         "Scheduled", Message: fmt.Sprintf("Successfully assigned default/%s to sim-0042", name), Type: corev1.EventTypeNormal,
		Count: 1, FirstTimestamp: now, LastTimestamp: now,
		Source:              corev1.EventSource{Component: "default-scheduler"},
		ReportingController: "default-scheduler", ReportingInstance: "skiff",
	}
	schemas.Default(e)
	return e
}

// runningStatus is what a kubelet reports once the pod's container runs.
func runningStatus(p *corev1.Pod) {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "192.168.3.17", PodIP: "10.244.3.17", StartTime: &now,
		HostIPs: []corev1.HostIP{{IP: "192.168.3.17"}}, PodIPs: []corev1.PodIP{{IP: "10.244.3.17"}}, QOSClass: corev1.PodQOSBurstable,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, Started: ptr.To(true), Image: "registry.example/web:1.4.2",
			ImageID: "sha256:4b1e2f", ContainerID: "containerd://9f3c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}
	for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
}

// The create memo's key for a Deployment's pod: what a create pays on top of the field
// manager when it misses, and all but a copy of the entries when it hits.
func BenchmarkCreateKey(b *testing.B) {
	pods := benchKind(b, "", "pods")
	p := controllerPod()
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		var ok bool
		if buf, ok = createKey(buf[:0], pods, "", "replicaset-controller", p); !ok {
			b.Fatal("no key")
		}
	}
	b.ReportMetric(float64(len(buf)), "key-bytes")
}
