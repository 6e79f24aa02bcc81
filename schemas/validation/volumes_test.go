package validation_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestVolumeRules(t *testing.T) {
	vol := func(src corev1.VolumeSource) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) { s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: src}} }
	}
	mount := func(m corev1.VolumeMount) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			m.Name, m.MountPath = "v", "/data"
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{m}
		}
	}
	hostType := corev1.HostPathType("Pipe")
	prop := corev1.MountPropagationBidirectional
	c0 := "spec.containers[0]"
	cases := []struct {
		name, path, want string
		mut              func(*corev1.PodSpec)
	}{
		{"supported sources pass", "", "", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{
				{Name: "a", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("1Mi"))}}},
				{Name: "b", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, Items: []corev1.KeyToPath{{Key: "k", Path: "dir/k"}}}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}},
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}},
			}
		}},
		{"pvc accepted", "", "", vol(corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}})},
		{"pvc without claim", "spec.volumes[0].persistentVolumeClaim.claimName", "Required value", vol(corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{}})},
		{"nfs refused", "spec.volumes[0].nfs", `Unsupported value: "nfs": supported values: "configMap", "downwardAPI", "emptyDir", "hostPath", "persistentVolumeClaim", "projected", "secret"`,
			vol(corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/x"}})},
		{"csi refused", "spec.volumes[0].csi", "Unsupported value", vol(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d"}})},
		{"ephemeral refused", "spec.volumes[0].ephemeral", "Unsupported value", vol(corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}})},
		{"image refused", "spec.volumes[0].image", "Unsupported value", vol(corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "x"}})},
		{"hugepages medium", "spec.volumes[0].emptyDir.medium", "Unsupported value", vol(corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumHugePages}})},
		{"hostPath type", "spec.volumes[0].hostPath.type", `Unsupported value: "Pipe"`, vol(corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x", Type: &hostType}})},
		{"item escapes", "spec.volumes[0].secret.items[0].path", "must not contain '..'", vol(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", Items: []corev1.KeyToPath{{Key: "k", Path: "a/../../x"}}}})},
		{"mode", "spec.volumes[0].configMap.defaultMode", "between 0 and 0777", vol(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, DefaultMode: ptr(int32(0o1777))}})},
		{"downward volume field", "spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath", "Unsupported value", vol(corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{{Path: "ip", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}})},
		{"cluster trust bundle", "spec.volumes[0].projected.sources[0].clusterTrustBundle", "Unsupported value", vol(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Path: "b"}}}}})},
		{"subPath escapes", c0 + ".volumeMounts[0].subPath", "must not contain '..'", mount(corev1.VolumeMount{SubPath: "x/../.."})},
		{"propagation", c0 + ".volumeMounts[0].mountPropagation", "Unsupported value", mount(corev1.VolumeMount{MountPropagation: &prop})},
		{"envFrom both", c0 + ".envFrom[0]", "must specify one of", func(s *corev1.PodSpec) {
			s.Containers[0].EnvFrom = []corev1.EnvFromSource{{}}
		}},
		{"fileKeyRef", c0 + ".env[0].valueFrom.fileKeyRef", "Unsupported value", func(s *corev1.PodSpec) {
			s.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "v", Path: "p", Key: "k"}}}}
		}},
	}
	for _, c := range cases {
		p := &corev1.Pod{ObjectMeta: meta("web"), Spec: podSpec()}
		c.mut(&p.Spec)
		check(t, c.name, p, c.path, c.want)
	}
}
