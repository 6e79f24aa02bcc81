package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/schemas"
)

// A pod asking for what the node cannot do yet is not run without it: a volume type the node
// cannot provide and a termination message from the logs are refused at admission, naming the
// field.
func TestUnsupportedPodFeaturesAreRefusedNotSkipped(t *testing.T) {
	n := startNode(t)
	k, _ := schemas.ByResource("", "v1", "pods")
	nfs := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "with-nfs", Namespace: "default"}, Spec: corev1.PodSpec{
		Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nas", Path: "/export"}}}},
		Containers: []corev1.Container{{Name: "echo", Image: "skiff.local/httpecho:v1"}}}}
	_, err := n.cp.Client.Create(context.Background(), nfs)
	if want := `spec.volumes[0].nfs: Unsupported value: "nfs"`; !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("pod with an nfs volume: %v, want 422 with %q", err, want)
	}
	if _, err := n.cp.Client.Get(context.Background(), k, "default", "with-nfs"); !apierrors.IsNotFound(err) {
		t.Fatalf("refused pod was written: %v", err)
	}
	logs := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "with-log-message", Namespace: "default"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "echo", Image: "skiff.local/httpecho:v1",
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}}}}
	_, err = n.cp.Client.Create(context.Background(), logs)
	if want := `spec.containers[0].terminationMessagePolicy: Unsupported value: "FallbackToLogsOnError"`; !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("pod with terminationMessagePolicy FallbackToLogsOnError: %v, want 422 with %q", err, want)
	}
}
