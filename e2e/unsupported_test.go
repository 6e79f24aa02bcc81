package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/schemas"
)

// A pod asking for what the node cannot do yet is not run without it: a volume type the node
// cannot provide, a termination message from the logs, the host's namespaces and security
// settings the kubelet does not apply are refused at admission, naming each field, and nothing
// is written.
func TestUnsupportedPodFeaturesAreRefusedNotSkipped(t *testing.T) {
	n := startNode(t)
	k, _ := schemas.ByResource("", "v1", "pods")
	echo := func() corev1.Container { return corev1.Container{Name: "echo", Image: "skiff.local/httpecho:v1"} }
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want []string
	}{
		{"with-nfs", corev1.PodSpec{
			Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nas", Path: "/export"}}}},
			Containers: []corev1.Container{echo()}},
			[]string{`spec.volumes[0].nfs: Unsupported value: "nfs"`}},
		{"with-log-message", corev1.PodSpec{Containers: []corev1.Container{func() corev1.Container {
			c := echo()
			c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
			return c
		}()}}, []string{`spec.containers[0].terminationMessagePolicy: Unsupported value: "FallbackToLogsOnError"`}},
		{"with-host", corev1.PodSpec{HostNetwork: true, HostPID: true,
			SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}}},
			Containers: []corev1.Container{func() corev1.Container {
				c := echo()
				c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
				return c
			}()}},
			[]string{"spec.hostNetwork: Forbidden: not supported by Skiff's kubelet", "spec.hostPID: Forbidden: not supported by Skiff's kubelet",
				"spec.securityContext.sysctls: Forbidden: not supported by Skiff's kubelet",
				"spec.containers[0].securityContext.privileged: Forbidden: not supported by Skiff's kubelet"}},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: "default"}, Spec: tc.spec}
		_, err := n.cp.Client.Create(context.Background(), p)
		for _, want := range tc.want {
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
				t.Errorf("pod %s: %v, want 422 with %q", tc.name, err, want)
			}
		}
		if _, err := n.cp.Client.Get(context.Background(), k, "default", tc.name); !apierrors.IsNotFound(err) {
			t.Errorf("refused pod %s was written: %v", tc.name, err)
		}
	}
}
