package e2e

import (
	"archive/tar"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/skiff-sh/skiff/deploy/images/examples"
)

// A pod whose image the node lacks gets it pulled from a registry (an OCI registry served in
// this test on localhost, spoken to over plain HTTP as containerd does for localhost).
func TestImageIsPulledFromARegistry(t *testing.T) {
	n := startNode(t)
	ref := "localhost:" + serveRegistry(t) + "/pulled/httpecho:v2"
	pushExample(t, ref)

	n.apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: pulled, labels: {app: pulled}}
spec:
  containers:
  - name: echo
    image: `+ref+`
`)
	p := n.waitReady(t, "app=pulled", 1)[0]
	if got := p.Status.ContainerStatuses[0].Image; got != ref {
		t.Fatalf("status image %q, want %q", got, ref)
	}
}

// serveRegistry serves an OCI registry on 127.0.0.1 for the test; it returns its port.
func serveRegistry(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return strings.Split(ln.Addr().String(), ":")[1]
}

// pushExample pushes the example image (built as an OCI tarball) to ref.
func pushExample(t *testing.T, ref string) {
	t.Helper()
	pushImage(t, examples.BuildHTTPEcho, ref)
}

// pushImage pushes the image build writes (an OCI tarball) to ref.
func pushImage(t *testing.T, build func(dir string) (string, error), ref string) {
	t.Helper()
	dir := t.TempDir()
	tarPath, err := build(filepath.Join(dir, "build"))
	if err != nil {
		t.Fatal(err)
	}
	layoutDir := filepath.Join(dir, "layout")
	if err := untar(tarPath, layoutDir); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) == 0 {
		t.Fatalf("index: %v", err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
}

func untar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.Clean("/"+h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, tr); err != nil {
			out.Close()
			return err
		}
		out.Close()
	}
}
