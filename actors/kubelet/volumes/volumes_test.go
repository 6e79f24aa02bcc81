package volumes_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/kubelet/downward"
	"github.com/skiff-sh/skiff/actors/kubelet/volumes"
)

func manager(t *testing.T) *volumes.Manager {
	root := t.TempDir()
	return &volumes.Manager{PodDir: func(uid string) string { return filepath.Join(root, uid) }}
}

func hostPathPod(path string, typ corev1.HostPathType) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &typ}}}}}}
}

// hostPath types are checked (and the OrCreate ones made) with Kubernetes' messages.
func TestHostPathTypes(t *testing.T) {
	m, dir := manager(t), t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cases := []struct {
		path    string
		typ     corev1.HostPathType
		wantErr string
	}{
		{dir, corev1.HostPathDirectory, ""},
		{file, corev1.HostPathDirectory, "hostPath type check failed: " + file + " is not a directory"},
		{filepath.Join(dir, "missing"), corev1.HostPathFile, "is not a file"},
		{file, corev1.HostPathFile, ""},
		{sock, corev1.HostPathSocket, ""},
		{file, corev1.HostPathSocket, "is not a socket file"},
		{"/dev/null", corev1.HostPathCharDev, ""},
		{file, corev1.HostPathBlockDev, "is not a block device"},
		{filepath.Join(dir, "new-dir"), corev1.HostPathDirectoryOrCreate, ""},
		{filepath.Join(dir, "new-file"), corev1.HostPathFileOrCreate, ""},
		{dir, corev1.HostPathFileOrCreate, "is not a file"},
	}
	for _, c := range cases {
		vols, err := m.Setup(context.Background(), hostPathPod(c.path, c.typ), downward.Node{})
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s %s: %v", c.typ, c.path, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s %s: error %v, want %q", c.typ, c.path, err, c.wantErr)
		case c.wantErr == "" && vols["h"].Path != c.path:
			t.Errorf("%s %s: volume at %q", c.typ, c.path, vols["h"].Path)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "new-dir")); err != nil || !st.IsDir() {
		t.Errorf("DirectoryOrCreate made no directory: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dir, "new-file")); err != nil || !st.Mode().IsRegular() {
		t.Errorf("FileOrCreate made no file: %v", err)
	}
}

// A subPath cannot leave its volume, not even through a symlink a container left in it;
// API data volumes mount read-only whatever the mount says.
func TestSubPathStaysInsideTheVolume(t *testing.T) {
	m := manager(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u2"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}
	vols, err := m.Setup(context.Background(), pod, downward.Node{})
	if err != nil {
		t.Fatal(err)
	}
	root := vols["e"].Path
	if st, err := os.Stat(root); err != nil || st.Mode().Perm() != 0o777 {
		t.Fatalf("emptyDir %s: %v %v, want mode 0777", root, st, err)
	}
	if err := os.Symlink("/etc", filepath.Join(root, "evil")); err != nil {
		t.Fatal(err)
	}
	c := &corev1.Container{VolumeMounts: []corev1.VolumeMount{
		{Name: "e", MountPath: "/a", SubPath: "evil"},
		{Name: "e", MountPath: "/b", SubPathExpr: "logs/$(POD)"},
	}}
	expand := func(s string) string { return strings.ReplaceAll(s, "$(POD)", "p") }
	mounts, err := vols.Mounts(c, expand)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mounts[0].HostPath, filepath.Join(root, "etc"); got != want {
		t.Fatalf("subPath through a symlink to /etc resolved to %q, want %q (inside the volume)", got, want)
	}
	if got := mounts[1].HostPath; got != filepath.Join(root, "logs", "p") {
		t.Fatalf("subPathExpr resolved to %q", got)
	}
	if st, err := os.Stat(mounts[1].HostPath); err != nil || !st.IsDir() {
		t.Fatalf("a missing subPath was not made: %v", err)
	}
	if _, err := vols.Mounts(&corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "e", MountPath: "/x", SubPath: "../x"}}}, expand); err == nil {
		t.Fatal("a subPath with .. was accepted")
	}
	if mounts[0].ReadOnly {
		t.Fatal("an emptyDir mount is read-only without asking")
	}
}

// A Manager without a token source refuses a serviceAccountToken projection, saying so, and
// writes nothing of the volume (the kubelet's source is tested in actors/kubelet).
func TestServiceAccountTokenRefusedWithoutTokenSource(t *testing.T) {
	m := manager(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u3"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}}}}
	_, err := m.Setup(context.Background(), pod, downward.Node{})
	want := `MountVolume.SetUp failed for volume "kube-api-access" : sources[0]: serviceAccountToken projections are not supported by this node yet`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	if _, err := os.Stat(m.PodDir("u3")); !os.IsNotExist(err) {
		t.Fatalf("a refused volume left files: %v", err)
	}
}
