// Package examples builds the example images from this repository's own programs, as OCI
// tarballs (no docker, no registry), for the demo, the tests and the airgap images directory.
package examples

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/skiff-sh/skiff/internal/ocibuild"
)

// HTTPEcho is the reference of the example HTTP/UDP echo image.
const HTTPEcho = "skiff.local/httpecho:v1"

// Busybox is the reference of the busybox stand-in (deploy/images/busybox): the name charts'
// test pods give as `busybox`.
const Busybox = "docker.io/library/busybox:latest"

// InCluster is the reference of the in-cluster client image (deploy/images/incluster).
const InCluster = "skiff.local/incluster:v1"

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

// BuildInCluster compiles incluster statically and writes dir/incluster.tar; it returns its path.
func BuildInCluster(dir string) (string, error) {
	bin, err := buildStatic(dir, "incluster")
	if err != nil {
		return "", err
	}
	defer os.Remove(bin)
	tar := filepath.Join(dir, "incluster.tar")
	_, err = ocibuild.WriteFile(tar, ocibuild.Image{Name: InCluster,
		Files: []ocibuild.File{{Src: bin, Dst: "/incluster", Mode: 0o755}}, Entrypoint: []string{"/incluster"}})
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
	// Reproducible (no paths, build ID or VCS stamp): the same source gives the same image,
	// which lets skiff carry it (deploy/images/demo) and a test check it is current.
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", bin, "github.com/skiff-sh/skiff/deploy/images/"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", name, err, out)
	}
	return bin, nil
}

// HTTPEchoSource is a digest of httpecho's Go source (its non-test .go files), which an image
// carried in the binary records, to tell when it needs building again whatever the toolchain.
func HTTPEchoSource() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	paths, err := filepath.Glob(filepath.Join(filepath.Dir(file), "..", "httpecho", "*.go"))
	if err != nil {
		return "", err
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(p), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
