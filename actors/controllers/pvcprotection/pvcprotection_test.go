package pvcprotection_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/pvcprotection"
)

func claim(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To(""),
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
}

// A deleted claim goes at once when no pod names it, and only once its pod has ended when one
// does; the apiserver gives every new claim the finalizer.
func TestClaimStaysWhileAPodUsesIt(t *testing.T) {
	cp := ct.Start(t)
	ct.Spawn(t, cp, "pvc-protection", pvcprotection.New(controllerkit.Config{Informers: cp.Informers, Client: cp.Client}))
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "db", Image: "img:1"}},
		Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "used"}}}},
	}}
	for _, o := range []runtime.Object{claim("used"), claim("free"), pod} {
		if _, err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	used := ct.Get[*corev1.PersistentVolumeClaim](t, cp, "", "persistentvolumeclaims", "default", "used")
	if !slices.Contains(used.Finalizers, pvcprotection.Finalizer) {
		t.Fatalf("finalizers %v", used.Finalizers)
	}
	kind := controllerkit.MustKind("", "persistentvolumeclaims")
	for _, n := range []string{"used", "free"} {
		if err := cp.Client.Delete(ctx, kind, "default", n, nil); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(name string) func() error {
		return func() error {
			if _, err := ct.TryGet[*corev1.PersistentVolumeClaim](cp, "", "persistentvolumeclaims", "default", name); !apierrors.IsNotFound(err) {
				return ct.Errorf("claim %s still there (%v)", name, err)
			}
			return nil
		}
	}
	ct.Wait(t, gone("free"))
	if p := ct.Get[*corev1.PersistentVolumeClaim](t, cp, "", "persistentvolumeclaims", "default", "used"); p.DeletionTimestamp == nil {
		t.Fatal("claim in use: no deletion timestamp")
	}
	p := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", "db")
	p.Status.Phase = corev1.PodSucceeded
	if _, err := cp.Client.UpdateStatus(ctx, p); err != nil {
		t.Fatal(err)
	}
	ct.Wait(t, gone("used"))
}
