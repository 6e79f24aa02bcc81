package controlplane_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/actors/apiserver"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

func saPod(name, sa string, automount *bool, containers ...corev1.Container) *corev1.Pod {
	if len(containers) == 0 {
		containers = []corev1.Container{{Name: "c", Image: "skiff.local/httpecho:v1"}}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{ServiceAccountName: sa, AutomountServiceAccountToken: automount, Containers: containers}}
}

// The projected volume kube's admission writes, field for field.
var wantTokenVolume = corev1.ProjectedVolumeSource{
	DefaultMode: ptr(int32(0o644)),
	Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr(int64(3607))}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
	},
}

func tokenVolumes(p *corev1.Pod) []corev1.Volume {
	var out []corev1.Volume
	for _, v := range p.Spec.Volumes {
		if strings.HasPrefix(v.Name, apiserver.TokenVolumePrefix) {
			out = append(out, v)
		}
	}
	return out
}

func TestServiceAccountAdmission(t *testing.T) {
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) {
		c.ServiceAccountAdmission, c.AutomountServiceAccountTokens = true, true
	})
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: cp.URL()})
	ctx := context.Background()
	mkNamespace(t, ctx, cs, "adm")
	pods := cs.CoreV1().Pods("adm")

	// Sent right after its namespace, before `default` may exist: admission waits for it.
	own := corev1.Container{Name: "own", Image: "skiff.local/httpecho:v1",
		VolumeMounts: []corev1.VolumeMount{{Name: "mine", MountPath: apiserver.TokenMountPath}}}
	in := saPod("web", "", nil, corev1.Container{Name: "c", Image: "skiff.local/httpecho:v1"}, own)
	in.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "skiff.local/httpecho:v1"}}
	in.Spec.Volumes = []corev1.Volume{{Name: "mine", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	p, err := pods.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("pod in a new namespace: %v", err)
	}
	if p.Spec.ServiceAccountName != "default" || p.Spec.DeprecatedServiceAccount != "default" {
		t.Fatalf("account %q/%q; want default", p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount)
	}
	vols := tokenVolumes(p)
	if len(vols) != 1 || len(vols[0].Name) != len(apiserver.TokenVolumePrefix)+5 || !reflect.DeepEqual(*vols[0].Projected, wantTokenVolume) {
		t.Fatalf("token volumes %+v", vols)
	}
	want := corev1.VolumeMount{Name: vols[0].Name, ReadOnly: true, MountPath: apiserver.TokenMountPath}
	for _, c := range []corev1.Container{p.Spec.InitContainers[0], p.Spec.Containers[0]} {
		if len(c.VolumeMounts) != 1 || !reflect.DeepEqual(c.VolumeMounts[0], want) {
			t.Errorf("container %s mounts %+v; want %+v", c.Name, c.VolumeMounts, want)
		}
	}
	if m := p.Spec.Containers[1].VolumeMounts; len(m) != 1 || m[0].Name != "mine" {
		t.Errorf("a container with its own mount at the path got %+v", m)
	}

	// A missing account is refused, as kube words it, and nothing is written.
	_, err = pods.Create(ctx, saPod("ghostly", "ghost", nil), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `error looking up service account adm/ghost: serviceaccount "ghost" not found`) {
		t.Fatalf("missing account: %v", err)
	}
	if _, err := pods.Get(ctx, "ghostly", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("refused pod was written: %v", err)
	}

	// Opting out: the pod's word wins over the account's.
	no, yes := false, true
	if _, err := cs.CoreV1().ServiceAccounts("adm").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "quiet"}, AutomountServiceAccountToken: &no}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pod     *corev1.Pod
		volumes int
	}{
		{saPod("pod-off", "default", &no), 0},
		{saPod("sa-off", "quiet", nil), 0},
		{saPod("pod-on", "quiet", &yes), 1},
	} {
		got, err := pods.Create(ctx, c.pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(tokenVolumes(got)); n != c.volumes {
			t.Errorf("%s: %d token volumes; want %d", c.pod.Name, n, c.volumes)
		}
	}
}
