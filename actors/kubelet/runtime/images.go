package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	containerd "github.com/containerd/containerd/v2/client"
)

// ImportImage loads an OCI image-layout or docker-save tarball and unpacks
// it for the snapshotter, so containers start without a registry. It
// returns the image names the tarball carried.
func (r *Runtime) ImportImage(ctx context.Context, tarPath string) ([]string, error) {
	return Import(r.ctx(ctx), r.client, tarPath)
}

// Import loads an OCI or docker-save tarball into containerd and unpacks it for the snapshotter
// pods use; ctx must carry the containerd namespace. `skiff image load` uses it against a
// running node's containerd.
func Import(ctx context.Context, client *containerd.Client, tarPath string) ([]string, error) {
	f, err := os.Open(tarPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	imgs, err := client.Import(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", tarPath, err)
	}
	if len(imgs) == 0 {
		return nil, fmt.Errorf("import %s: no named image in the tarball", tarPath)
	}
	names := make([]string, 0, len(imgs))
	for _, img := range imgs {
		if err := containerd.NewImage(client, img).Unpack(ctx, snapshotter); err != nil {
			return nil, fmt.Errorf("unpack %s: %w", img.Name, err)
		}
		names = append(names, img.Name)
	}
	return names, nil
}

// ImportDir imports every *.tar in dir (airgap images shipped with the
// node), in name order; one bad tarball does not stop the others.
func (r *Runtime) ImportDir(ctx context.Context, dir string) error {
	paths, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil {
		return err
	}
	sort.Strings(paths)
	var errs []error
	for _, p := range paths {
		if _, err := r.ImportImage(ctx, p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
