package authz

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Every place a pod spec can name a Secret or ConfigMap is an edge of the node graph.
func TestPodReferences(t *testing.T) {
	ref := func(n string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: n} }
	refp := func(n string) *corev1.LocalObjectReference { r := ref(n); return &r }
	env := []corev1.EnvVar{
		{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: ref("s-env")}}},
		{Name: "B", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref("c-env")}}},
		{Name: "C", Value: "literal"},
	}
	p := &corev1.Pod{Spec: corev1.PodSpec{
		ImagePullSecrets: []corev1.LocalObjectReference{ref("s-pull")},
		InitContainers:   []corev1.Container{{EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("s-init")}}}}},
		Containers:       []corev1.Container{{Env: env, EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("c-from")}}}}},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Env: []corev1.EnvVar{{Name: "D", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: ref("s-eph")}}}}}}},
		Volumes: []corev1.Volume{
			{VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s-vol"}}},
			{VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("c-vol")}}},
			{VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: ref("s-proj")}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref("c-proj")}}}}}},
			{VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{NodePublishSecretRef: refp("s-csi")}}},
			{VolumeSource: corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{SecretRef: refp("s-rbd")}}},
			{VolumeSource: corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{SecretName: "s-azure"}}},
			{VolumeSource: corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{}}}, // no secretRef: nothing
			{VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
		},
	}}
	wantS := []string{"s-azure", "s-csi", "s-env", "s-eph", "s-init", "s-proj", "s-pull", "s-rbd", "s-vol"}
	wantC := []string{"c-env", "c-from", "c-proj", "c-vol"}
	gotS, gotC := podSecretNames(p), podConfigMapNames(p)
	slices.Sort(gotS)
	slices.Sort(gotC)
	if !slices.Equal(gotS, wantS) || !slices.Equal(gotC, wantC) {
		t.Fatalf("secrets %v (want %v), configmaps %v (want %v)", gotS, wantS, gotC, wantC)
	}
	if got := podClaimNames(p); !slices.Equal(got, []string{"data"}) {
		t.Fatalf("claims %v", got)
	}
}
