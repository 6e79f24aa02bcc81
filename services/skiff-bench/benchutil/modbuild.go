package benchutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildFromModule builds the packages of a helper module kept in Skiff's tree (dir, relative to
// the repository root, with its own go.mod, so a compared system's dependencies stay out of
// Skiff's) once per cacheName into the user's cache dir. bins maps each binary's name to its
// package; it returns each binary's path by name.
func BuildFromModule(ctx context.Context, dir, cacheName string, bins map[string]string) (map[string]string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return nil, err
	}
	root, err := ModuleRoot(ctx)
	if err != nil {
		return nil, err
	}
	out := filepath.Join(cache, "skiff-bench", cacheName)
	paths := map[string]string{}
	for name, pkg := range bins {
		bin := filepath.Join(out, name)
		paths[name] = bin
		if _, err := os.Stat(bin); err == nil {
			continue
		}
		// Built under a temporary name and renamed, so an interrupted build is not taken for done.
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin+".tmp", pkg)
		cmd.Dir = filepath.Join(root, dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %w\n%s", pkg, err, out)
		}
		if err := os.Rename(bin+".tmp", bin); err != nil {
			return nil, err
		}
	}
	return paths, nil
}
