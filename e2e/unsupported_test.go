package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// A pod asking for what the node cannot do yet is not run without it: init containers wait
// with CreateContainerConfigError saying why, and a volume type the node cannot provide is
// refused at admission, naming the field.
func TestUnsupportedPodFeaturesAreRefusedNotSkipped(t *testing.T) {
	n := startNode(t)
	n.apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: with-init}
spec:
  initContainers:
  - {name: setup, image: skiff.local/httpecho:v1, args: ["-version"]}
  containers:
  - {name: echo, image: skiff.local/httpecho:v1}
`)
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
	for _, name := range []string{"with-init"} {
		testutil.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
			o, err := n.cp.Client.Get(context.Background(), k, "default", name)
			if err != nil {
				return err
			}
			p := o.(*corev1.Pod)
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Waiting != nil && cs.State.Waiting.Reason == "CreateContainerConfigError" && cs.State.Waiting.Message != "" {
					if cs.State.Running != nil {
						return fmt.Errorf("%s runs", name)
					}
					return nil
				}
			}
			return fmt.Errorf("%s: statuses %+v", name, p.Status.ContainerStatuses)
		})
	}
}
