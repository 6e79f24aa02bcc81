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

// InCluster is the reference of the in-cluster client image (deploy/images/incluster).
const InCluster = "skiff.local/incluster:v1"

// BuildHTTPEcho compiles httpecho statically and writes dir/httpecho.tar; it returns its path.
func BuildHTTPEcho(dir string) (string, error) {
	return build(dir, "httpecho", ocibuild.Image{Name: HTTPEcho, Dirs: []string{"/tmp"}, Env: []string{"PORT=8080"}})
}

// BuildInCluster compiles incluster statically and writes dir/incluster.tar; it returns its path.
func BuildInCluster(dir string) (string, error) {
	return build(dir, "incluster", ocibuild.Image{Name: InCluster})
}

// build compiles deploy/images/<prog> statically into img as /<prog>, its entrypoint, and
// writes dir/<prog>.tar.
func build(dir, prog string, img ocibuild.Image) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, prog)
	cmd := exec.Command("go", "build", "-o", bin, "github.com/skiff-sh/skiff/deploy/images/"+prog)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", prog, err, out)
	}
	defer os.Remove(bin)
	tar := filepath.Join(dir, prog+".tar")
	img.Files = []ocibuild.File{{Src: bin, Dst: "/" + prog, Mode: 0o755}}
	img.Entrypoint = []string{"/" + prog}
	_, err := ocibuild.WriteFile(tar, img)
	return tar, err
}
