package volumes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/schemas/defaults"
)

// Claims reads what a persistentVolumeClaim volume names, as the node.
type Claims interface {
	PersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	PersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error)
}

// annProvisionedBy marks a volume the local-path provisioner made (kube's annotation).
const annProvisionedBy = "pv.kubernetes.io/provisioned-by"

// claim mounts the volume a claim is bound to: its directory on this node, bind-mounted as it
// is (read-only when the pod's volume says so). A claim not bound yet fails the setup, as in
// Kubernetes, so the pod waits with a FailedMount event and the next sync tries again.
func (m *Manager) claim(ctx context.Context, pod *corev1.Pod, src *corev1.PersistentVolumeClaimVolumeSource) (Volume, error) {
	if m.Claims == nil {
		return Volume{}, fmt.Errorf("persistentVolumeClaim volumes are not supported by this node")
	}
	pvc, err := m.Claims.PersistentVolumeClaim(ctx, pod.Namespace, src.ClaimName)
	if err != nil {
		return Volume{}, err
	}
	ref := pod.Namespace + "/" + src.ClaimName
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return Volume{}, fmt.Errorf("error processing PVC %s: PVC is not bound", ref)
	}
	pv, err := m.Claims.PersistentVolume(ctx, pvc.Spec.VolumeName)
	if err != nil {
		return Volume{}, err
	}
	if r := pv.Spec.ClaimRef; r == nil || r.UID != pvc.UID {
		return Volume{}, fmt.Errorf("error processing PVC %s: volume %s is not bound to it", ref, pv.Name)
	}
	var v Volume
	switch s := &pv.Spec.PersistentVolumeSource; {
	case s.HostPath != nil && pv.Annotations[annProvisionedBy] == defaults.LocalPathProvisioner:
		v, err = m.localPath(s.HostPath.Path)
	case s.HostPath != nil:
		v, err = hostPath(s.HostPath)
	case s.Local != nil:
		v, err = hostPath(&corev1.HostPathVolumeSource{Path: s.Local.Path, Type: ptrTo(corev1.HostPathDirectory)})
	default:
		err = fmt.Errorf("volume %s: only hostPath and local volumes are supported by this node", pv.Name)
	}
	if err != nil {
		return Volume{}, err
	}
	v.ReadOnly = src.ReadOnly
	return v, nil
}

// localPath makes a local-path volume's directory on first use, writable by any user of the
// pod as the local-path provisioner makes it; it must lie in this node's local-path directory.
func (m *Manager) localPath(p string) (Volume, error) {
	if m.LocalPathDir == "" || !within(m.LocalPathDir, p) {
		return Volume{}, fmt.Errorf("local-path volume %s is not in this node's local-path directory", p)
	}
	if err := os.MkdirAll(p, 0o777); err != nil {
		return Volume{}, err
	}
	if err := os.Chmod(p, 0o777); err != nil {
		return Volume{}, err
	}
	return Volume{Path: p}, nil
}

// within: p is a directory directly inside root (what the provisioner names).
func within(root, p string) bool {
	return filepath.Dir(filepath.Clean(p)) == filepath.Clean(root) && !strings.Contains(filepath.Base(p), "..")
}

func ptrTo[T any](v T) *T { return &v }
