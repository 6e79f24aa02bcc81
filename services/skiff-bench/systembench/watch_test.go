package systembench

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The trackers see in a cached skeleton what they would see in the whole object.
func TestSkeletonsKeepWhatTheTrackersRead(t *testing.T) {
	created := metav1.NewTime(time.Unix(100, 0))
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u", ResourceVersion: "7", CreationTimestamp: created,
			Labels: map[string]string{"app": "x"}},
		Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
	}
	obj, err := podSkeleton(p)
	if err != nil {
		t.Fatal(err)
	}
	sp := obj.(*corev1.Pod)
	if sp.Name != "p" || sp.Namespace != "default" || sp.UID != "u" || sp.ResourceVersion != "7" ||
		!sp.CreationTimestamp.Equal(&created) || sp.Status.Phase != corev1.PodRunning {
		t.Fatalf("the skeleton lost what the tracker or the cache reads: %+v", sp)
	}
	if len(sp.Spec.Containers) != 0 || sp.Labels != nil || sp.Status.PodIP != "" {
		t.Fatalf("the skeleton kept what nothing reads: %+v", sp)
	}
	var pods podTracker
	pods.byUID = map[types.UID]*podRec{}
	pods.observe(sp, time.Unix(101, 0))
	if pods.running != 1 || !pods.byUID["u"].created.Equal(created.Time) {
		t.Fatalf("the tracker did not count the skeleton as Running: %+v", pods.byUID["u"])
	}

	ready := metav1.NewTime(time.Unix(50, 0))
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "3"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: ready, Reason: "KubeletReady"}}}}
	obj, err = nodeSkeleton(n)
	if err != nil {
		t.Fatal(err)
	}
	sn := obj.(*corev1.Node)
	if sn.Name != "n1" || sn.ResourceVersion != "3" || len(sn.Status.Conditions) != 1 ||
		sn.Status.Conditions[0].Status != corev1.ConditionTrue || !sn.Status.Conditions[0].LastTransitionTime.Equal(&ready) {
		t.Fatalf("the node skeleton lost its Ready condition: %+v", sn.Status)
	}
}
