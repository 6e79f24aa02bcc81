// Package volumes is the kubelet's volume manager: it makes each volume of a pod real on the
// node under the pod's directory and says how to bind-mount them into its containers.
//
// emptyDir is a directory on disk (medium Memory: a tmpfs, of at most its sizeLimit); secret
// and projected volumes are always a tmpfs, so their contents never reach the disk; configMap,
// secret, downwardAPI and projected volumes are written with the atomic writer (atomic.go) on
// every sync, so a changed ConfigMap or Secret reaches the files within a sync period;
// hostPath is type-checked as Kubernetes does. Everything lives in files and mounts, so a
// restarted agent finds an adopted pod's volumes as they were; the runtime's StopSandbox
// unmounts and removes them with the pod's directory.
package volumes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/skiff-sh/skiff/actors/kubelet/downward"
)

// Objects reads what volumes name, as the node: a missing object is Kubernetes' kubelet error
// (configmap "x" not found).
type Objects interface {
	ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// TokenSource returns a service account token for a projected serviceAccountToken source.
type TokenSource func(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) ([]byte, error)

// Manager sets up pods' volumes. Its fields are required but Token (nil: serviceAccountToken
// sources are refused) and Claims (nil: persistentVolumeClaim volumes are refused).
type Manager struct {
	PodDir  func(podUID string) string
	Objects Objects
	Token   TokenSource
	Claims  Claims
	// LocalPathDir holds this node's local-path volumes (see localpath.go).
	LocalPathDir string
}

// Volume is one set-up volume of a pod.
type Volume struct {
	Path     string // on the host
	ReadOnly bool   // always mounted read-only (API data volumes)
	memory   bool
	limit    *resource.Quantity // emptyDir sizeLimit
}

// Volumes are a pod's set-up volumes by name.
type Volumes map[string]Volume

// SetupError is a volume that could not be set up, worded as Kubernetes' FailedMount event.
type SetupError struct {
	Volume string
	Err    error
}

func (e *SetupError) Error() string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", e.Volume, e.Err)
}

func (e *SetupError) Unwrap() error { return e.Err }

// Setup makes every volume of pod real (again): idempotent, and each API data volume's files
// are brought up to date. n is what downwardAPI items read.
func (m *Manager) Setup(ctx context.Context, pod *corev1.Pod, n downward.Node) (Volumes, error) {
	out := Volumes{}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		vol, err := m.setup(ctx, pod, v, n)
		if err != nil {
			return nil, &SetupError{Volume: v.Name, Err: err}
		}
		out[v.Name] = vol
	}
	return out, nil
}

// dir is where a volume of a kind lives, laid out as Kubernetes' kubelet does.
func (m *Manager) dir(pod *corev1.Pod, plugin, name string) string {
	return filepath.Join(m.PodDir(string(pod.UID)), "volumes", "kubernetes.io~"+plugin, name)
}

func (m *Manager) setup(ctx context.Context, pod *corev1.Pod, v *corev1.Volume, n downward.Node) (Volume, error) {
	src := &v.VolumeSource
	switch {
	case src.EmptyDir != nil:
		return m.emptyDir(pod, v.Name, src.EmptyDir)
	case src.HostPath != nil:
		return hostPath(src.HostPath)
	case src.ConfigMap != nil:
		cm := src.ConfigMap
		return m.apiData(pod, "configmap", v.Name, false, func() (map[string]File, error) {
			return m.keyedFiles(ctx, pod.Namespace, "configmap", cm.Name, cm.Optional, cm.Items, mode(cm.DefaultMode))
		})
	case src.Secret != nil:
		sec := src.Secret
		return m.apiData(pod, "secret", v.Name, true, func() (map[string]File, error) {
			return m.keyedFiles(ctx, pod.Namespace, "secret", sec.SecretName, sec.Optional, sec.Items, mode(sec.DefaultMode))
		})
	case src.DownwardAPI != nil:
		return m.apiData(pod, "downward-api", v.Name, false, func() (map[string]File, error) {
			return downwardFiles(pod, src.DownwardAPI.Items, mode(src.DownwardAPI.DefaultMode), n)
		})
	case src.Projected != nil:
		return m.apiData(pod, "projected", v.Name, true, func() (map[string]File, error) { return m.projectedFiles(ctx, pod, src.Projected, n) })
	case src.PersistentVolumeClaim != nil:
		return m.claim(ctx, pod, src.PersistentVolumeClaim)
	}
	return Volume{}, fmt.Errorf("volume type not supported by this node")
}

func (m *Manager) emptyDir(pod *corev1.Pod, name string, e *corev1.EmptyDirVolumeSource) (Volume, error) {
	dir := m.dir(pod, "empty-dir", name)
	var size int64
	if e.SizeLimit != nil {
		size = e.SizeLimit.Value()
	}
	switch e.Medium {
	case corev1.StorageMediumDefault:
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return Volume{}, err
		}
	case corev1.StorageMediumMemory:
		if err := mountTmpfs(dir, size); err != nil {
			return Volume{}, err
		}
	default:
		return Volume{}, fmt.Errorf("emptyDir medium %q is not supported by this node", e.Medium)
	}
	// Writable by any user of the pod, as Kubernetes makes it (MkdirAll's mode is umasked).
	if err := os.Chmod(dir, 0o777); err != nil {
		return Volume{}, err
	}
	return Volume{Path: dir, memory: e.Medium == corev1.StorageMediumMemory, limit: e.SizeLimit}, nil
}

// apiData writes a volume of API data (memory-backed ones on a tmpfs) with the atomic writer.
func (m *Manager) apiData(pod *corev1.Pod, plugin, name string, memory bool, files func() (map[string]File, error)) (Volume, error) {
	payload, err := files()
	if err != nil {
		return Volume{}, err
	}
	dir := m.dir(pod, plugin, name)
	if memory {
		if err := mountTmpfs(dir, 0); err != nil {
			return Volume{}, err
		}
	}
	if err := WritePayload(dir, payload); err != nil {
		return Volume{}, err
	}
	return Volume{Path: dir, ReadOnly: true, memory: memory}, nil
}

func mode(m *int32) os.FileMode {
	if m == nil {
		return 0o644
	}
	return os.FileMode(*m) & 0o777
}
