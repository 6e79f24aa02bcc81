package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

func benchSpec() *corev1.PodSpec {
	return &corev1.PodSpec{
		Containers: []corev1.Container{{Name: "web", Image: "registry.local/web:1.2.3", Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: "TCP"}},
			Env:                    []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}},
			Resources:              corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: "File", ImagePullPolicy: "IfNotPresent"}},
		RestartPolicy: "Always", DNSPolicy: "ClusterFirst", SchedulerName: "default-scheduler", ServiceAccountName: "default", NodeName: "node-1",
		Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: "Exists", Effect: "NoExecute"}},
	}
}

// An unchanged pod spec (every status write's) compared by encoding, against the walk alone.
func BenchmarkUnchangedPodSpec(b *testing.B) {
	a, c := benchSpec(), benchSpec()
	b.Run("encoding", func(b *testing.B) {
		for b.Loop() {
			semanticallyEqual(a, c)
		}
	})
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			apiequality.Semantic.DeepEqual(a, c)
		}
	})
}
