package statefulset_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/garbagecollector"
	"github.com/skiff-sh/skiff/actors/controllers/pvcprotection"
	"github.com/skiff-sh/skiff/actors/controlplane"
)

// withClaims gives the set the template "data" (ReadWriteOnce, 1Gi, label tier=db) and a pod
// template volume of the same name, which the claim must replace.
func withClaims(policy *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy) func(*appsv1.StatefulSet) {
	return func(s *appsv1.StatefulSet) {
		s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: map[string]string{"tier": "db"}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}}
		s.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		s.Spec.PersistentVolumeClaimRetentionPolicy = policy
	}
}

func policy(whenDeleted, whenScaled appsv1.PersistentVolumeClaimRetentionPolicyType) *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy {
	return &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: whenDeleted, WhenScaled: whenScaled}
}

const (
	retain = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	del    = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
)

// collectors runs the garbage collector and the pvc-protection controller, which together
// remove claims whose owners are gone.
func collectors(t *testing.T, cp *controlplane.ControlPlane) {
	ct.Spawn(t, cp, "garbagecollector", garbagecollector.New(garbagecollector.Config{Informers: cp.Informers, Client: cp.Client}))
	ct.Spawn(t, cp, "pvcprotection", pvcprotection.New(controllerkit.Config{Informers: cp.Informers, Client: cp.Client}))
}

func getClaim(t *testing.T, cp *controlplane.ControlPlane, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	return ct.Get[*corev1.PersistentVolumeClaim](t, cp, "", "persistentvolumeclaims", "default", name)
}

// claimVolume is the claim the pod's volume "data" names; it fails when there is not exactly
// one volume of that name or it is not a claim.
func claimVolume(t *testing.T, cp *controlplane.ControlPlane, pod string) (string, types.UID) {
	t.Helper()
	p := ct.Get[*corev1.Pod](t, cp, "", "pods", "default", pod)
	var found []corev1.Volume
	for _, v := range p.Spec.Volumes {
		if v.Name == "data" {
			found = append(found, v)
		}
	}
	if len(found) != 1 || found[0].PersistentVolumeClaim == nil {
		t.Fatalf("pod %s volumes %+v: want one volume data on a claim", pod, p.Spec.Volumes)
	}
	return found[0].PersistentVolumeClaim.ClaimName, p.UID
}

// setRefs counts the claim's owner references to the set s (a controller reference).
func setRefs(c *corev1.PersistentVolumeClaim, s *appsv1.StatefulSet) int {
	n := 0
	for _, r := range c.OwnerReferences {
		if r.UID == s.UID && r.Kind == "StatefulSet" && ptr.Deref(r.Controller, false) {
			n++
		}
	}
	return n
}

func waitClaimRefs(t *testing.T, cp *controlplane.ControlPlane, name string, ok func(*corev1.PersistentVolumeClaim) bool) {
	t.Helper()
	ct.Wait(t, func() error {
		c, err := ct.TryGet[*corev1.PersistentVolumeClaim](cp, "", "persistentvolumeclaims", "default", name)
		if err != nil {
			return err
		}
		if !ok(c) {
			return ct.Errorf("claim %s owners %+v", name, c.OwnerReferences)
		}
		return nil
	})
}

func waitGone(t *testing.T, cp *controlplane.ControlPlane, resource, name string) {
	t.Helper()
	ct.Wait(t, func() error {
		o, err := cp.Client.Get(context.Background(), controllerkit.MustKind("", resource), "default", name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			m := controllerkit.Meta(o)
			return ct.Errorf("%s %s still there (owners %+v, finalizers %v, deleting %v)", resource, name, m.GetOwnerReferences(), m.GetFinalizers(), m.GetDeletionTimestamp())
		}
		return ct.Errorf("%s %s: %v", resource, name, err)
	})
}

// A set of 3 with a template: claims data-web-0..2 made from it, each pod mounting its own;
// a pod made again mounts the same claim; the policy's owner references come and go with it;
// with Retain the claims outlive the set.
func TestClaimsFromTemplates(t *testing.T) {
	cp, ctx := start(t, 2)
	collectors(t, cp)
	if _, err := cp.Client.Create(ctx, newSet("web", 3, withClaims(nil))); err != nil {
		t.Fatal(err)
	}
	s := waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.ReadyReplicas == 3 })
	for i := range 3 {
		name := fmt.Sprintf("data-web-%d", i)
		c := getClaim(t, cp, name)
		if c.Labels["app"] != "web" || c.Labels["tier"] != "db" || len(c.Spec.AccessModes) != 1 || c.Spec.AccessModes[0] != corev1.ReadWriteOnce ||
			c.Spec.Resources.Requests.Storage().String() != "1Gi" || ptr.Deref(c.Spec.StorageClassName, "") != "local-path" || len(c.OwnerReferences) != 0 {
			t.Fatalf("claim %s: labels %v spec %+v owners %v", name, c.Labels, c.Spec, c.OwnerReferences)
		}
		if got, _ := claimVolume(t, cp, fmt.Sprintf("web-%d", i)); got != name {
			t.Fatalf("pod web-%d mounts claim %q; want %q", i, got, name)
		}
	}

	// web-1 made again mounts the claim it had, not a new one.
	before := getClaim(t, cp, "data-web-1").UID
	replacePod(t, cp, "web-1")
	if got, _ := claimVolume(t, cp, "web-1"); got != "data-web-1" || getClaim(t, cp, "data-web-1").UID != before {
		t.Fatalf("web-1 made again mounts %q (claim uid %s, was %s)", got, getClaim(t, cp, "data-web-1").UID, before)
	}

	// whenScaled Retain: the claim of an ordinal scaled away stays, and is mounted again when
	// the ordinal comes back.
	kept := getClaim(t, cp, "data-web-2").UID
	scale(t, cp, "web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To(int32(2)) })
	waitGone(t, cp, "pods", "web-2")
	if c := getClaim(t, cp, "data-web-2"); c.DeletionTimestamp != nil || len(c.OwnerReferences) != 0 {
		t.Fatalf("claim of a scaled-away ordinal under Retain: deleting %v owners %v", c.DeletionTimestamp, c.OwnerReferences)
	}
	scale(t, cp, "web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To(int32(3)) })
	waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.ReadyReplicas == 3 })
	if got, _ := claimVolume(t, cp, "web-2"); got != "data-web-2" || getClaim(t, cp, "data-web-2").UID != kept {
		t.Fatalf("web-2 back mounts %q (claim uid %s, was %s)", got, getClaim(t, cp, "data-web-2").UID, kept)
	}

	// whenDeleted Delete: the set owns every claim; back to Retain: no longer.
	scale(t, cp, "web", func(s *appsv1.StatefulSet) { s.Spec.PersistentVolumeClaimRetentionPolicy = policy(del, retain) })
	for i := range 3 {
		waitClaimRefs(t, cp, fmt.Sprintf("data-web-%d", i), func(c *corev1.PersistentVolumeClaim) bool {
			return len(c.OwnerReferences) == 1 && setRefs(c, s) == 1
		})
	}
	scale(t, cp, "web", func(s *appsv1.StatefulSet) { s.Spec.PersistentVolumeClaimRetentionPolicy = policy(retain, retain) })
	for i := range 3 {
		waitClaimRefs(t, cp, fmt.Sprintf("data-web-%d", i), func(c *corev1.PersistentVolumeClaim) bool { return len(c.OwnerReferences) == 0 })
	}

	// Retain: the set and its pods go, the claims stay.
	if err := cp.Client.Delete(ctx, controllerkit.MustKind("apps", "statefulsets"), "default", "web", nil); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		waitGone(t, cp, "pods", fmt.Sprintf("web-%d", i))
	}
	for i := range 3 {
		if c := getClaim(t, cp, fmt.Sprintf("data-web-%d", i)); c.DeletionTimestamp != nil {
			t.Fatalf("claim %s deleted under Retain", c.Name)
		}
	}
}

// whenScaled Delete: the claim of an ordinal scaled away goes with its pod; whenDeleted
// Delete: the rest go with the set.
func TestClaimRetentionDelete(t *testing.T) {
	cp, ctx := start(t, 2)
	collectors(t, cp)
	if _, err := cp.Client.Create(ctx, newSet("web", 2, withClaims(policy(del, del)))); err != nil {
		t.Fatal(err)
	}
	s := waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.ReadyReplicas == 2 })
	for _, name := range []string{"data-web-0", "data-web-1"} {
		if c := getClaim(t, cp, name); len(c.OwnerReferences) != 1 || setRefs(c, s) != 1 {
			t.Fatalf("claim %s owners %+v; want the set", name, c.OwnerReferences)
		}
	}
	scale(t, cp, "web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To(int32(1)) })
	waitGone(t, cp, "pods", "web-1")
	waitGone(t, cp, "persistentvolumeclaims", "data-web-1")
	if c := getClaim(t, cp, "data-web-0"); c.DeletionTimestamp != nil || len(c.OwnerReferences) != 1 || setRefs(c, s) != 1 {
		t.Fatalf("claim data-web-0 of a kept ordinal: deleting %v owners %+v", c.DeletionTimestamp, c.OwnerReferences)
	}

	if err := cp.Client.Delete(ctx, controllerkit.MustKind("apps", "statefulsets"), "default", "web", nil); err != nil {
		t.Fatal(err)
	}
	waitGone(t, cp, "pods", "web-0")
	waitGone(t, cp, "persistentvolumeclaims", "data-web-0")
}

// A claim of the pod's name that is being deleted holds the pod back; once it is gone a new
// claim is made and the pod with it.
func TestWaitsForClaimBeingDeleted(t *testing.T) {
	cp, ctx := start(t, 0)
	held := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-web-0", Namespace: "default", Finalizers: []string{"test.skiff.sh/hold"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	out, err := cp.Client.Create(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	old := out.(*corev1.PersistentVolumeClaim).UID
	if err := cp.Client.Delete(ctx, controllerkit.MustKind("", "persistentvolumeclaims"), "default", "data-web-0", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.Create(ctx, newSet("web", 1, withClaims(nil))); err != nil {
		t.Fatal(err)
	}
	// The controller writes status after it has tried: it has seen the claim and made no pod.
	waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.Replicas == 0 })
	if got := podNames(t, cp, "web"); len(got) != 0 {
		t.Fatalf("pods made while their claim was being deleted: %v", got)
	}
	// Let the old claim go (the pvc-protection finalizer too: no controller runs here).
	ct.Wait(t, func() error {
		c, err := ct.TryGet[*corev1.PersistentVolumeClaim](cp, "", "persistentvolumeclaims", "default", "data-web-0")
		if err != nil || c.UID != old {
			return err
		}
		c.Finalizers = nil
		_, err = cp.Client.Update(ctx, c)
		return err
	})
	waitStatus(t, cp, "web", func(s appsv1.StatefulSetStatus) bool { return s.Replicas == 1 })
	if c := getClaim(t, cp, "data-web-0"); c.UID == old {
		t.Fatal("the pod was made on the claim being deleted")
	}
	if got, _ := claimVolume(t, cp, "web-0"); got != "data-web-0" {
		t.Fatalf("web-0 mounts %q", got)
	}
}
