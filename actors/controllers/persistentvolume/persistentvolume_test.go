package persistentvolume_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/persistentvolume"
	"github.com/skiff-sh/skiff/actors/controllers/pvcprotection"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/schemas/defaults"
)

func setup(t *testing.T) *controlplane.ControlPlane {
	cp := ct.Start(t)
	cfg := controllerkit.Config{Informers: cp.Informers, Client: cp.Client}
	ct.Spawn(t, cp, "pv", persistentvolume.New(cfg))
	ct.Spawn(t, cp, "pvc-protection", pvcprotection.New(cfg)) // deleted claims go once no pod names them
	return cp
}

func create(t *testing.T, cp *controlplane.ControlPlane, objs ...runtime.Object) {
	t.Helper()
	for _, o := range objs {
		if _, err := cp.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
}

func storage(q string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}
}

func volume(name, size, class string, policy corev1.PersistentVolumeReclaimPolicy, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		Capacity: storage(size), AccessModes: modes, StorageClassName: class, PersistentVolumeReclaimPolicy: policy,
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/" + name}},
	}}
}

func claim(name, size string, class *string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: class,
		Resources: corev1.VolumeResourceRequirements{Requests: storage(size)},
	}}
}

func getPV(t *testing.T, cp *controlplane.ControlPlane, name string) *corev1.PersistentVolume {
	return ct.Get[*corev1.PersistentVolume](t, cp, "", "persistentvolumes", "", name)
}

func getPVC(t *testing.T, cp *controlplane.ControlPlane, name string) *corev1.PersistentVolumeClaim {
	return ct.Get[*corev1.PersistentVolumeClaim](t, cp, "", "persistentvolumeclaims", "default", name)
}

// waitBound waits until claim and volume are bound to each other, both phases Bound.
func waitBound(t *testing.T, cp *controlplane.ControlPlane, claimName, volumeName string) *corev1.PersistentVolumeClaim {
	t.Helper()
	var pvc *corev1.PersistentVolumeClaim
	ct.Wait(t, func() error {
		pvc = getPVC(t, cp, claimName)
		pv, err := ct.TryGet[*corev1.PersistentVolume](cp, "", "persistentvolumes", "", volumeName)
		if err != nil {
			return err
		}
		if pvc.Spec.VolumeName != volumeName || pvc.Status.Phase != corev1.ClaimBound || pv.Status.Phase != corev1.VolumeBound ||
			pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
			return ct.Errorf("claim %q %s, volume %s claimRef %v", pvc.Spec.VolumeName, pvc.Status.Phase, pv.Status.Phase, pv.Spec.ClaimRef)
		}
		return nil
	})
	return pvc
}

func waitVolumePhase(t *testing.T, cp *controlplane.ControlPlane, name string, phase corev1.PersistentVolumePhase) *corev1.PersistentVolume {
	t.Helper()
	var pv *corev1.PersistentVolume
	ct.Wait(t, func() error {
		if pv = getPV(t, cp, name); pv.Status.Phase != phase {
			return ct.Errorf("volume %s is %s; want %s", name, pv.Status.Phase, phase)
		}
		return nil
	})
	return pv
}

func deleteClaim(t *testing.T, cp *controlplane.ControlPlane, name string) {
	t.Helper()
	if err := cp.Client.Delete(context.Background(), controllerkit.MustKind("", "persistentvolumeclaims"), "default", name, nil); err != nil {
		t.Fatal(err)
	}
}

// TestBindsToTheSmallestFittingVolume: an Immediate claim gets the smallest available volume
// of its class with room enough (and matching its selector); the rest
// stay Available; Retain keeps the volume, Released, once the claim is deleted.
func TestBindsToTheSmallestFittingVolume(t *testing.T) {
	cp := setup(t)
	rwo, retain := corev1.ReadWriteOnce, corev1.PersistentVolumeReclaimRetain
	labelled := volume("labelled", "10Gi", "manual", retain, rwo)
	labelled.Labels = map[string]string{"tier": "fast"}
	create(t, cp,
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "manual"}, Provisioner: "kubernetes.io/no-provisioner"},
		volume("small", "1Gi", "manual", retain, rwo), volume("fits", "3Gi", "manual", retain, rwo),
		volume("big", "5Gi", "manual", retain, rwo),
		volume("other-class", "2Gi", "", retain, rwo), labelled)
	for _, n := range []string{"small", "fits", "big", "other-class", "labelled"} {
		waitVolumePhase(t, cp, n, corev1.VolumeAvailable)
	}
	create(t, cp, claim("data", "2Gi", ptr.To("manual")))
	pvc := waitBound(t, cp, "data", "fits")
	if q := pvc.Status.Capacity[corev1.ResourceStorage]; q.String() != "3Gi" || len(pvc.Status.AccessModes) != 1 || pvc.Annotations[persistentvolume.AnnBindCompleted] != "yes" {
		t.Fatalf("claim status %+v annotations %v", pvc.Status, pvc.Annotations)
	}
	selective := claim("fast", "1Gi", ptr.To("manual"))
	selective.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "fast"}}
	create(t, cp, selective)
	waitBound(t, cp, "fast", "labelled")
	for _, n := range []string{"small", "big", "other-class"} {
		if pv := getPV(t, cp, n); pv.Status.Phase != corev1.VolumeAvailable || pv.Spec.ClaimRef != nil {
			t.Errorf("volume %s: %s %v", n, pv.Status.Phase, pv.Spec.ClaimRef)
		}
	}

	deleteClaim(t, cp, "data")
	pv := waitVolumePhase(t, cp, "fits", corev1.VolumeReleased)
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != "data" {
		t.Fatalf("released volume lost its claimRef: %v", pv.Spec.ClaimRef)
	}
	// A new claim of the same name is another claim: the released volume is not given to it.
	create(t, cp, claim("data", "2Gi", ptr.To("manual")))
	waitBound(t, cp, "data", "big")
	if pv := getPV(t, cp, "fits"); pv.Status.Phase != corev1.VolumeReleased {
		t.Fatalf("released volume is %s", pv.Status.Phase)
	}
}

// TestClaimWithoutVolumeWaits: no volume fits and the class has no provisioner here: the
// claim stays Pending with kube's event; a volume created later is bound.
func TestClaimWithoutVolumeWaits(t *testing.T) {
	cp := setup(t)
	create(t, cp, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "manual"}, Provisioner: "example.com/nfs"},
		claim("later", "1Gi", ptr.To("manual")))
	ct.WaitEvent(t, cp, "later", "ExternalProvisioning", persistentvolume.Name)
	if pvc := getPVC(t, cp, "later"); pvc.Status.Phase != corev1.ClaimPending {
		t.Fatalf("claim %s", pvc.Status.Phase)
	}
	create(t, cp, volume("arrives", "1Gi", "manual", corev1.PersistentVolumeReclaimRetain, corev1.ReadWriteOnce))
	waitBound(t, cp, "later", "arrives")
}

// TestLocalPathProvisioning: a claim of the default class waits for its first consumer; once
// the scheduler has picked a node, a volume under the node's local-path directory with
// affinity for that node is made and bound; deleting the claim deletes the volume (Delete).
func TestLocalPathProvisioning(t *testing.T) {
	cp := setup(t)
	create(t, cp, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelHostname: "n1"},
		Annotations: map[string]string{defaults.LocalPathDirAnnotation: "/var/lib/skiff/local-path"}}})
	create(t, cp, claim("data", "1Gi", nil))
	ct.WaitEvent(t, cp, "data", "WaitForFirstConsumer", persistentvolume.Name)
	pvc := getPVC(t, cp, "data")
	if *pvc.Spec.StorageClassName != defaults.LocalPathClass || pvc.Status.Phase != corev1.ClaimPending {
		t.Fatalf("claim class %q phase %s", *pvc.Spec.StorageClassName, pvc.Status.Phase)
	}
	pvc.Annotations = map[string]string{defaults.SelectedNodeAnnotation: "n1"}
	if _, err := cp.Client.Update(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
	name := "pvc-" + string(pvc.UID)
	waitBound(t, cp, "data", name)
	pv := getPV(t, cp, name)
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != "/var/lib/skiff/local-path/"+name+"_default_data" ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Spec.StorageClassName != defaults.LocalPathClass ||
		len(terms) != 1 || terms[0].MatchExpressions[0].Values[0] != "n1" || pv.Annotations[persistentvolume.AnnProvisionedBy] != defaults.LocalPathProvisioner {
		t.Fatalf("provisioned volume %+v", pv.Spec)
	}
	ct.WaitEvent(t, cp, "data", "ProvisioningSucceeded", persistentvolume.Name)

	deleteClaim(t, cp, "data")
	ct.Wait(t, func() error {
		if _, err := ct.TryGet[*corev1.PersistentVolume](cp, "", "persistentvolumes", "", name); !apierrors.IsNotFound(err) {
			return ct.Errorf("volume still there: %v", err)
		}
		return nil
	})
}

// TestReclaimDeleteOfAStaticVolumeFails: nothing can delete a hand-made hostPath volume, so
// Delete leaves it Failed with kube's message instead of pretending.
func TestReclaimDeleteOfAStaticVolumeFails(t *testing.T) {
	cp := setup(t)
	pv := volume("static", "1Gi", "", corev1.PersistentVolumeReclaimDelete, corev1.ReadWriteOnce)
	create(t, cp, pv, claim("data", "1Gi", ptr.To("")))
	waitBound(t, cp, "data", "static")
	deleteClaim(t, cp, "data")
	got := waitVolumePhase(t, cp, "static", corev1.VolumeFailed)
	if got.Status.Message != `error getting deleter volume plugin for volume "static": no deletable volume plugin matched` {
		t.Fatalf("message %q", got.Status.Message)
	}
}

// TestClaimLost: a bound claim whose volume is deleted is Lost.
func TestClaimLost(t *testing.T) {
	cp := setup(t)
	create(t, cp, volume("gone", "1Gi", "", corev1.PersistentVolumeReclaimRetain, corev1.ReadWriteOnce), claim("data", "1Gi", ptr.To("")))
	waitBound(t, cp, "data", "gone")
	if err := cp.Client.Delete(context.Background(), controllerkit.MustKind("", "persistentvolumes"), "", "gone", nil); err != nil {
		t.Fatal(err)
	}
	ct.Wait(t, func() error {
		if p := getPVC(t, cp, "data"); p.Status.Phase != corev1.ClaimLost {
			return ct.Errorf("claim %s", p.Status.Phase)
		}
		return nil
	})
	ct.WaitEvent(t, cp, "data", "ClaimLost", persistentvolume.Name)
}
