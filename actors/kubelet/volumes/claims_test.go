package volumes_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/actors/kubelet/downward"
	"github.com/skiff-sh/skiff/schemas/defaults"
)

// fakeClaims serves claims and volumes from maps, NotFound otherwise.
type fakeClaims struct {
	pvcs map[string]*corev1.PersistentVolumeClaim
	pvs  map[string]*corev1.PersistentVolume
}

func (f *fakeClaims) PersistentVolumeClaim(_ context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	if c, ok := f.pvcs[ns+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaim"}, name)
}

func (f *fakeClaims) PersistentVolume(_ context.Context, name string) (*corev1.PersistentVolume, error) {
	if v, ok := f.pvs[name]; ok {
		return v, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolume"}, name)
}

func claimPod(claim string, readOnly bool) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly}}}}}}
}

func localPathVolume(name, path string) *corev1.PersistentVolume {
	dirType := corev1.HostPathDirectoryOrCreate
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": defaults.LocalPathProvisioner}},
		Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{UID: "c1", Namespace: "default", Name: "data"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &dirType}}}}
}

func boundClaim(volume string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default", UID: "c1"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
}

// A claim's volume is its directory, made on first use inside the node's local-path
// directory; an unbound claim, a volume outside that directory or bound to another claim
// fail the setup with what the FailedMount event says.
func TestClaimVolumes(t *testing.T) {
	m, lp := manager(t), t.TempDir()
	m.LocalPathDir = lp
	dir := filepath.Join(lp, "pvc-c1_default_data")
	f := &fakeClaims{pvcs: map[string]*corev1.PersistentVolumeClaim{"default/data": boundClaim("pvc-c1")},
		pvs: map[string]*corev1.PersistentVolume{"pvc-c1": localPathVolume("pvc-c1", dir)}}
	m.Claims = f
	vols, err := m.Setup(context.Background(), claimPod("data", true), downward.Node{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o777 {
		t.Fatalf("volume directory: %v %v", st, err)
	}
	if v := vols["data"]; v.Path != dir || !v.ReadOnly {
		t.Fatalf("volume %+v", v)
	}

	for _, c := range []struct {
		name, want string
		change     func()
	}{
		{"missing claim", `persistentvolumeclaim "other" not found`, func() {}},
		{"unbound", "error processing PVC default/other: PVC is not bound", func() {
			f.pvcs["default/other"] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default"},
				Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
		}},
		{"bound elsewhere", "volume pvc-c1 is not bound to it", func() {
			f.pvcs["default/other"] = boundClaim("pvc-c1")
			f.pvcs["default/other"].UID = "c2"
		}},
		{"outside the directory", "is not in this node's local-path directory", func() {
			f.pvcs["default/other"] = boundClaim("escape")
			f.pvs["escape"] = localPathVolume("escape", "/etc")
		}},
	} {
		c.change()
		_, err := m.Setup(context.Background(), claimPod("other", false), downward.Node{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `MountVolume.SetUp failed for volume "data"`) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
}

// CleanLocalPath removes the directories of deleted volumes only, and only once no pod of
// the node names their claim.
func TestCleanLocalPath(t *testing.T) {
	m, lp := manager(t), t.TempDir()
	m.LocalPathDir = lp
	kept, gone, used := filepath.Join(lp, "pvc-a_default_keep"), filepath.Join(lp, "pvc-b_default_gone"), filepath.Join(lp, "pvc-c_default_used")
	for _, d := range []string{kept, gone, used, filepath.Join(lp, "not-ours")} {
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m.Claims = &fakeClaims{pvs: map[string]*corev1.PersistentVolume{"pvc-a": {}}}
	inUse := func(ns, claim string) bool { return ns == "default" && claim == "used" }
	removed, err := m.CleanLocalPath(context.Background(), inUse)
	if err != nil || len(removed) != 1 || removed[0] != gone {
		t.Fatalf("removed %v, %v", removed, err)
	}
	for _, d := range []string{kept, used, filepath.Join(lp, "not-ours")} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("%s still there: %v", gone, err)
	}
	if removed, _ = m.CleanLocalPath(context.Background(), func(string, string) bool { return false }); len(removed) != 1 || removed[0] != used {
		t.Fatalf("once unused: removed %v", removed)
	}
}
