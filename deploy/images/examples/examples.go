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

// BuildHTTPEcho compiles httpecho statically and writes dir/httpecho.tar; it returns its path.
func BuildHTTPEcho(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "httpecho")
	// Reproducible (no paths, build ID or VCS stamp): the same source gives the same image,
	// which lets skiff carry it (deploy/images/demo) and a test check it is current.
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", bin, "github.com/skiff-sh/skiff/deploy/images/httpecho")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build httpecho: %v\n%s", err, out)
	}
	defer os.Remove(bin)
	tar := filepath.Join(dir, "httpecho.tar")
	_, err := ocibuild.WriteFile(tar, ocibuild.Image{
		Name:       HTTPEcho,
		Files:      []ocibuild.File{{Src: bin, Dst: "/httpecho", Mode: 0o755}},
		Dirs:       []string{"/tmp"},
		Entrypoint: []string{"/httpecho"},
		Env:        []string{"PORT=8080"},
	})
	return tar, err
}
