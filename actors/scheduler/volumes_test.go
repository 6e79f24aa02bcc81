package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/defaults"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

func withClaim(p *corev1.Pod, claim string) *corev1.Pod {
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
	return p
}

func claim(name string, class *string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: class,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
}

func mustCreate(t *testing.T, cp *controlplane.ControlPlane, objs ...runtime.Object) {
	t.Helper()
	for _, o := range objs {
		if _, err := cp.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
}

func waitUnschedulableWith(t *testing.T, cp *controlplane.ControlPlane, name, want string) {
	t.Helper()
	waitUnschedulableMsg(t, cp, name, want, func(msg string) bool { return strings.Contains(msg, want) })
}

// TestVolumeBindingFollowsTheClaim: a pod waits for its claim to exist and be bound, then
// goes where the bound volume's node affinity says, moved by the claim's events.
func TestVolumeBindingFollowsTheClaim(t *testing.T) {
	cp, _ := startWithScheduler(t, controllers.PersistentVolume)
	addNode(t, cp, node("n1", "4"))
	addNode(t, cp, node("n2", "4"))
	mustCreate(t, cp, withClaim(pod("web", "1"), "data"))
	waitUnschedulableWith(t, cp, "web", `persistentvolumeclaim "data" not found`)

	mustCreate(t, cp, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "manual"}, Provisioner: "kubernetes.io/no-provisioner"},
		claim("data", ptr.To("manual")))
	waitUnschedulableWith(t, cp, "web", "pod has unbound immediate PersistentVolumeClaims")

	// Bound (by hand here, as the binder would) to a volume only n2 can reach.
	mustCreate(t, cp, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "on-n2"}, Spec: corev1.PersistentVolumeSpec{
		Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName: "manual", PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/srv/x"}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"n2"}}}}}}},
	}})
	k, _ := schemas.ByResource("", "v1", "persistentvolumeclaims")
	o, err := cp.Client.Get(context.Background(), k, "default", "data")
	if err != nil {
		t.Fatal(err)
	}
	pvc := o.(*corev1.PersistentVolumeClaim)
	pvc.Spec.VolumeName = "on-n2"
	if _, err := cp.Client.Update(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
	waitBoundTo(t, cp, "web", "n2")
}

// TestWaitForFirstConsumerSelectsANode: a claim of the default class (local-path) is not
// bound yet: the pod goes to a node that offers local-path volumes, and the claim records
// that node for the provisioner.
func TestWaitForFirstConsumerSelectsANode(t *testing.T) {
	cp, _ := startWithScheduler(t, controllers.PersistentVolume)
	addNode(t, cp, node("plain", "4"))
	withDir := node("storage", "4")
	withDir.Annotations = map[string]string{defaults.LocalPathDirAnnotation: "/var/lib/skiff/local-path"}
	addNode(t, cp, withDir)
	mustCreate(t, cp, claim("data", nil), withClaim(pod("db", "1"), "data"))
	waitBoundTo(t, cp, "db", "storage")
	k, _ := schemas.ByResource("", "v1", "persistentvolumeclaims")
	o, err := cp.Client.Get(context.Background(), k, "default", "data")
	if err != nil {
		t.Fatal(err)
	}
	if got := o.(*corev1.PersistentVolumeClaim).Annotations[defaults.SelectedNodeAnnotation]; got != "storage" {
		t.Fatalf("selected node %q", got)
	}
	// A second pod of the same claim follows it to that node, even with the other one freer.
	mustCreate(t, cp, withClaim(pod("db-2", "3"), "data"))
	waitBoundTo(t, cp, "db-2", "storage")
}

// TestWaitForFirstConsumerFindsTheVolume: for a class of hand-made volumes, the pod goes
// where an available volume that fits its claim is; with none anywhere it waits, and one
// created later lets it in.
func TestWaitForFirstConsumerFindsTheVolume(t *testing.T) {
	cp, _ := startWithScheduler(t, controllers.PersistentVolume)
	addNode(t, cp, node("n1", "4"))
	addNode(t, cp, node("n2", "4"))
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	local := func(name, size, node string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: "local", PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/srv/" + name}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}},
		}}
	}
	small, big := local("small-on-n1", "100Mi", "n1"), local("big-on-n2", "5Gi", "n2")
	mustCreate(t, cp, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wffc},
		small, big)
	mustCreate(t, cp, claim("data", ptr.To("local")), withClaim(pod("db", "1"), "data"))
	waitBoundTo(t, cp, "db", "n2")

	huge := claim("huge", ptr.To("local"))
	huge.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("10Gi")
	mustCreate(t, cp, huge, withClaim(pod("big-db", "1"), "huge"))
	waitUnschedulableWith(t, cp, "big-db", "2 node(s) did not find available persistent volumes to bind")
	later := local("huge-on-n1", "20Gi", "n1")
	mustCreate(t, cp, later)
	waitBoundTo(t, cp, "big-db", "n1")
}

// TestPodWaitsForItsClaimsToBeBound: as kube-scheduler's PreBind, a pod whose claim was given
// its node is bound only once the claim is bound (here by hand, no binder running), so its
// kubelet never tries to mount an unbound claim.
func TestPodWaitsForItsClaimsToBeBound(t *testing.T) {
	cp, _ := startWithScheduler(t)
	withDir := node("storage", "4")
	withDir.Annotations = map[string]string{defaults.LocalPathDirAnnotation: "/var/lib/skiff/local-path"}
	addNode(t, cp, withDir)
	mustCreate(t, cp, claim("data", nil), withClaim(pod("db", "1"), "data"))
	ctx := context.Background()
	claims, _ := schemas.ByResource("", "v1", "persistentvolumeclaims")
	var pvc *corev1.PersistentVolumeClaim
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		o, err := cp.Client.Get(ctx, claims, "default", "data")
		if err != nil {
			return err
		}
		pvc = o.(*corev1.PersistentVolumeClaim)
		if pvc.Annotations[defaults.SelectedNodeAnnotation] != "storage" {
			return fmt.Errorf("claim annotations %v", pvc.Annotations)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // the binding cycle had its chance
	if o, err := cp.Client.Get(ctx, podsKind(), "default", "db"); err != nil || o.(*corev1.Pod).Spec.NodeName != "" {
		t.Fatalf("pod bound before its claim: %v %v", o, err)
	}

	mustCreate(t, cp, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-data"}, Spec: corev1.PersistentVolumeSpec{
		Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName: *pvc.Spec.StorageClassName, PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/data"}},
		ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: "data", UID: pvc.UID},
	}})
	pvc.Spec.VolumeName = "pv-data"
	o, err := cp.Client.Update(ctx, pvc)
	if err != nil {
		t.Fatal(err)
	}
	pvc = o.(*corev1.PersistentVolumeClaim)
	time.Sleep(300 * time.Millisecond) // a volume name alone is not bound: the phase says so
	if o, err := cp.Client.Get(ctx, podsKind(), "default", "db"); err != nil || o.(*corev1.Pod).Spec.NodeName != "" {
		t.Fatalf("pod bound before its claim's phase: %v %v", o, err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	if _, err := cp.Client.UpdateStatus(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	waitBoundTo(t, cp, "db", "storage")
}
