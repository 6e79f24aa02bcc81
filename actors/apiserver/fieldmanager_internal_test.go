package apiserver

import (
	"encoding/json"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
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
