package volumes

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Local-path volumes: the PersistentVolume controller (the provisioner) names a volume's
// directory <LocalPathDir>/<volume>_<namespace>_<claim> and this node makes it on first mount
// (localPath). Once the volume is deleted (reclaim policy Delete, its claim gone), the node
// removes the directory: CleanLocalPath, run by the kubelet's housekeeping.

// CleanLocalPath removes the directory of every local-path volume that no longer exists,
// unless a pod of this node still names its claim (inUse): the data goes with the volume, as
// the provisioner's reclaim policy Delete says. A volume that cannot be read is kept for the
// next round. It returns the directories removed.
func (m *Manager) CleanLocalPath(ctx context.Context, inUse func(namespace, claim string) bool) ([]string, error) {
	if m.LocalPathDir == "" || m.Claims == nil {
		return nil, nil
	}
	entries, err := os.ReadDir(m.LocalPathDir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		parts := strings.Split(e.Name(), "_")
		if !e.IsDir() || len(parts) != 3 {
			continue // not a directory the provisioner named
		}
		volume, ns, claim := parts[0], parts[1], parts[2]
		if _, err := m.Claims.PersistentVolume(ctx, volume); !apierrors.IsNotFound(err) || inUse(ns, claim) {
			continue
		}
		dir := filepath.Join(m.LocalPathDir, e.Name())
		if err := os.RemoveAll(dir); err != nil {
			return removed, err
		}
		removed = append(removed, dir)
	}
	return removed, nil
}
