package kubelet_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/schemas/defaults"
)

// exec runs httpecho with args in the pod's first container, stdin given; it returns the
// exit code and stderr.
func (h *harness) exec(p *corev1.Pod, stdin string, args ...string) (int, string, error) {
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	var out, errOut bytes.Buffer
	code, err := h.n.Runtime.Exec(ctx(h.t), id, append([]string{"/httpecho"}, args...), strings.NewReader(stdin), &out, &errOut, false)
	return code, errOut.String(), err
}

func claimPod(name string, readOnly bool) *corev1.Pod {
	return pod(name, func(p *corev1.Pod) {
		p.Spec.NodeName = "" // the scheduler picks the node, and so the claim's
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data", ReadOnly: readOnly}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	})
}

// A claim of the default class (local-path) is provisioned on the node its first pod is
// scheduled to; what that pod writes is there for the next pod of the claim (read-only here,
// as its volume says); deleting the claim (reclaim Delete) removes the data from the node.
func TestPersistentVolumeClaimKeepsDataAcrossPods(t *testing.T) {
	h := start(t)
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: objMeta("data"), Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
	}}
	h.createAll(pvc)
	h.create(claimPod("writer", false))
	w := h.waitPod("writer", 90*time.Second, runningReady)
	if w.Spec.NodeName != nodeName {
		t.Fatalf("writer on %q", w.Spec.NodeName)
	}
	got, err := h.cp.Client.Get(ctx(t), controllerkit.MustKind("", "persistentvolumeclaims"), "default", "data")
	if err != nil {
		t.Fatal(err)
	}
	claim := got.(*corev1.PersistentVolumeClaim)
	if claim.Status.Phase != corev1.ClaimBound || claim.Annotations[defaults.SelectedNodeAnnotation] != nodeName || *claim.Spec.StorageClassName != defaults.LocalPathClass {
		t.Fatalf("claim %s on %q class %q", claim.Status.Phase, claim.Annotations[defaults.SelectedNodeAnnotation], *claim.Spec.StorageClassName)
	}
	pvo, err := h.cp.Client.Get(ctx(t), controllerkit.MustKind("", "persistentvolumes"), "", claim.Spec.VolumeName)
	if err != nil {
		t.Fatal(err)
	}
	dir := pvo.(*corev1.PersistentVolume).Spec.HostPath.Path
	if code, out, err := h.exec(w, "kept across pods", "-write", "/data/note"); err != nil || code != 0 {
		t.Fatalf("write: %d %v %s", code, err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "note")); err != nil || string(b) != "kept across pods" {
		t.Fatalf("on the node: %q %v", b, err)
	}
	h.deletePod("writer")
	h.waitGone("writer")

	h.create(claimPod("reader", true))
	r := h.waitPod("reader", 90*time.Second, runningReady)
	if s, err := h.cat(r, "/data/note"); err != nil || s != "kept across pods" {
		t.Fatalf("read back %q, %v", s, err)
	}
	if code, out, err := h.exec(r, "x", "-write", "/data/other"); err != nil || code == 0 || !strings.Contains(out, "read-only file system") {
		t.Fatalf("write to a read-only claim volume: %d %v %s", code, err, out)
	}
	h.deletePod("reader")
	h.waitGone("reader")

	if err := h.cp.Client.Delete(ctx(t), controllerkit.MustKind("", "persistentvolumeclaims"), "default", "data", nil); err != nil {
		t.Fatal(err)
	}
	wait(t, 30*time.Second, func() error {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			return fmt.Errorf("volume directory %s still there (%v)", dir, err)
		}
		return nil
	})
}

// A pod whose claim cannot be bound waits, unscheduled, with the scheduler's reason.
func TestPodOfAnUnboundImmediateClaimWaits(t *testing.T) {
	h := start(t)
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: objMeta("data"), Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: new(string),
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
	}}
	h.createAll(pvc)
	h.create(claimPod("waits", false))
	h.waitPod("waits", 30*time.Second, func(p *corev1.Pod) error {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && strings.Contains(c.Message, "pod has unbound immediate PersistentVolumeClaims") {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", p.Status.Conditions)
	})
}
