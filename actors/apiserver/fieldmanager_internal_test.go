package apiserver

import (
	"encoding/json"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/schemas"
)

func benchPod() *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img",
			Ports: []corev1.ContainerPort{{ContainerPort: 53, Protocol: "UDP"}, {ContainerPort: 53, Protocol: "TCP"}}}}}}
	schemas.Default(p)
	return p
}

// A status write as a kubelet sends it, through the status field manager: what tracking
// managed fields adds to each write.
func BenchmarkTrackStatusUpdate(b *testing.B) {
	k, _ := schemas.ByResource("", "v1", "pods")
	live := trackUpdate(k, "", k.New(), benchPod(), writeOptions{fieldManager: "kubectl"}).(*corev1.Pod)
	next := live.DeepCopy()
	next.Status.Phase = corev1.PodRunning
	next.Status.PodIP = "10.0.0.5"
	next.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Ready: true, Image: "img"}}
	wo := writeOptions{userAgent: "skiff-node"}
	var out runtime.Object
	for b.Loop() {
		out = trackUpdate(k, "status", live, next.DeepCopy(), wo)
	}
	before, _ := json.Marshal(next)
	after, _ := json.Marshal(out)
	b.ReportMetric(float64(len(after)-len(before)), "managedFields-bytes")
}

// A node's Lease renewal, which ownedUpdate answers without the field manager.
func BenchmarkTrackLeaseRenewal(b *testing.B) {
	k, _ := schemas.ByResource("coordination.k8s.io", "v1", "leases")
	now := metav1.NewMicroTime(time.Now())
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "kube-node-lease"},
		Spec: coordv1.LeaseSpec{HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &now}}
	wo := writeOptions{userAgent: "skiff-node"}
	live := trackUpdate(k, "", k.New(), l, wo).(*coordv1.Lease)
	live.UID = "u1"
	next := live.DeepCopy()
	next.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now.Add(10 * time.Second)))
	for b.Loop() {
		trackUpdate(k, "", live, next.DeepCopy(), wo)
	}
}

// A simulated kubelet's status write of a pod a controller created and the scheduler bound,
// as prepareUpdate hands it to the field manager: the stored pod with the new status.
func BenchmarkTrackPodStatusWrite(b *testing.B) {
	k, _ := schemas.ByResource("", "v1", "pods")
	p := benchPod()
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "u1", Controller: ptr.To(true)}}
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	live := trackUpdate(k, "", k.New(), p, writeOptions{fieldManager: "kube-controller-manager"}).(*corev1.Pod)
	live.UID = "u1"
	bound := live.DeepCopy()
	bound.Spec.NodeName = "n1"
	live = trackUpdate(k, "", live, bound, writeOptions{fieldManager: "skiff-scheduler"}).(*corev1.Pod)
	next := live.DeepCopy()
	now := metav1.Now()
	next.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.128.0.5", HostIP: "10.250.0.1", StartTime: &now,
		PodIPs: []corev1.PodIP{{IP: "10.128.0.5"}}, HostIPs: []corev1.HostIP{{IP: "10.250.0.1"}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "img", Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		next.Status.Conditions = append(next.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	wo := writeOptions{userAgent: "skiff-node"}
	b.ResetTimer()
	before := cpuTime()
	for b.Loop() {
		trackUpdate(k, "status", live, next.DeepCopy(), wo)
	}
	reportCPU(b, before)
}
