// Package examples builds the example images from this repository's own programs, as OCI
// tarballs (no docker, no registry), for the demo, the tests and the airgap images directory.
package examples

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/skiff-sh/skiff/internal/ocibuild"
)

// HTTPEcho is the reference of the example HTTP/UDP echo image.
const HTTPEcho = "skiff.local/httpecho:v1"

// Busybox is the reference of the busybox stand-in (deploy/images/busybox): the name charts'
// test pods give as `busybox`.
const Busybox = "docker.io/library/busybox:latest"

// BuildHTTPEcho compiles httpecho statically and writes dir/httpecho.tar; it returns its path.
func BuildHTTPEcho(dir string) (string, error) {
	bin, err := buildStatic(dir, "httpecho")
	if err != nil {
		return "", err
	}
	defer os.Remove(bin)
	tar := filepath.Join(dir, "httpecho.tar")
	_, err = ocibuild.WriteFile(tar, ocibuild.Image{
		Name:       HTTPEcho,
		Files:      []ocibuild.File{{Src: bin, Dst: "/httpecho", Mode: 0o755}},
		Dirs:       []string{"/tmp"},
		Symlinks:   map[string]string{"/bin/tar": "/httpecho", "/bin/test": "/httpecho"},
		Entrypoint: []string{"/httpecho"},
		// PATH as a base image would set it, so exec finds tar and test by name.
		Env: []string{"PORT=8080", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	})
	return tar, err
}

// BuildBusybox compiles the busybox stand-in and writes dir/busybox.tar, with the program
// as /bin/busybox and as each applet's name on PATH; it returns its path.
func BuildBusybox(dir string) (string, error) {
	bin, err := buildStatic(dir, "busybox")
	if err != nil {
		return "", err
	}
	defer os.Remove(bin)
	tar := filepath.Join(dir, "busybox.tar")
	_, err = ocibuild.WriteFile(tar, ocibuild.Image{
		Name: Busybox,
		Files: []ocibuild.File{{Src: bin, Dst: "/bin/busybox", Mode: 0o755},
			{Src: bin, Dst: "/bin/wget", Mode: 0o755}},
		Dirs: []string{"/tmp"},
		Env:  []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	})
	return tar, err
}

// buildStatic compiles deploy/images/<name> without cgo into dir/<name>.
func buildStatic(dir, name string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, "github.com/skiff-sh/skiff/deploy/images/"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", name, err, out)
	}
	return bin, nil
}
