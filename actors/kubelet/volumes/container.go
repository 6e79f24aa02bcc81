package volumes

import (
	"fmt"
	"os"
	"path/filepath"

	securejoin "github.com/cyphar/filepath-securejoin"
	corev1 "k8s.io/api/core/v1"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
)

// Mounts are the bind mounts of container c's volumeMounts. A subPath (or subPathExpr,
// expanded by expand with the container's variables) is resolved inside its volume, symlinks
// included, so it cannot reach outside it; a missing one is made as a directory, as Kubernetes
// does. API data volumes are always read-only.
func (vs Volumes) Mounts(c *corev1.Container, expand func(string) string) ([]kruntime.Mount, error) {
	var out []kruntime.Mount
	for _, vm := range c.VolumeMounts {
		v, ok := vs[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %q: no volume of that name was set up", vm.Name)
		}
		src := v.Path
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand(vm.SubPathExpr)
		}
		if sub != "" {
			var err error
			if src, err = subPath(v.Path, sub); err != nil {
				return nil, fmt.Errorf("volumeMount %q: %w", vm.Name, err)
			}
		}
		out = append(out, kruntime.Mount{HostPath: src, ContainerPath: vm.MountPath, ReadOnly: vm.ReadOnly || v.ReadOnly})
	}
	return out, nil
}

func subPath(root, sub string) (string, error) {
	if filepath.IsAbs(sub) || validPath(sub) != nil {
		return "", fmt.Errorf("subPath %q must be a relative path within the volume", sub)
	}
	p, err := securejoin.SecureJoin(root, sub)
	if err != nil {
		return "", fmt.Errorf("subPath %q: %w", sub, err)
	}
	if _, err := os.Lstat(p); os.IsNotExist(err) {
		if err := os.MkdirAll(p, 0o750); err != nil {
			return "", fmt.Errorf("subPath %q: %w", sub, err)
		}
	}
	return p, nil
}
