package main

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The CLI end to end: build it, wrap a file, and find the named image in
// the tarball's index.
func TestCLIWritesNamedImage(t *testing.T) {
	dir := t.TempDir()
	cli := filepath.Join(dir, "skiff-image-build")
	if out, err := exec.Command("go", "build", "-o", cli, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "app")
	if err := os.WriteFile(bin, []byte("app"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.tar")
	if b, err := exec.Command(cli, "-o", out, "-name", "skiff.local/app:v2", "-binary", bin, "-env", "A=1").CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s", err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatal("no index.json in the tarball")
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != "index.json" {
			continue
		}
		var idx struct {
			Manifests []struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(tr).Decode(&idx); err != nil {
			t.Fatal(err)
		}
		if got := idx.Manifests[0].Annotations["io.containerd.image.name"]; got != "skiff.local/app:v2" {
			t.Errorf("image name %q", got)
		}
		return
	}
}

func TestCLIRejectsMissingArgs(t *testing.T) {
	if os.Getenv("SKIFF_IMAGE_BUILD_MAIN") == "1" {
		os.Args = []string{"skiff-image-build"}
		main()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=TestCLIRejectsMissingArgs")
	cmd.Env = append(os.Environ(), "SKIFF_IMAGE_BUILD_MAIN=1")
	if err := cmd.Run(); err == nil {
		t.Error("no -o/-name: want a non-zero exit")
	}
}
