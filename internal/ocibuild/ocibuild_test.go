package ocibuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/images/archive"
	"github.com/containerd/containerd/v2/plugins/content/local"
	godigest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func testImage(t *testing.T) Image {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "app")
	if err := os.WriteFile(bin, []byte("#!not really a binary\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return Image{
		Name:       "skiff.local/test:v1",
		Files:      []File{{Src: bin, Dst: "/usr/bin/app"}},
		Dirs:       []string{"/tmp"},
		Symlinks:   map[string]string{"/bin/other": "/usr/bin/app", "/bin/third": "/usr/bin/app"},
		Entrypoint: []string{"/usr/bin/app"},
		Env:        []string{"PORT=8080"},
		Ports:      []string{"8080/tcp"},
	}
}

func readTar(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		out[h.Name] = data
		if h.Typeflag == tar.TypeDir {
			out[h.Name] = nil
		}
		if h.Typeflag == tar.TypeSymlink {
			out[h.Name] = []byte("-> " + h.Linkname)
		}
		if strings.HasSuffix(h.Name, "app") && h.Mode != 0o755 {
			t.Errorf("%s mode %o, want 755", h.Name, h.Mode)
		}
		if h.Name == "tmp/" && h.Mode != 0o1777 {
			t.Errorf("tmp mode %o, want 1777", h.Mode)
		}
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// Every blob is stored under its own digest, the chain index -> manifest ->
// config/layer holds together, and the config's diff_id is the digest of
// the uncompressed layer (what the snapshotter verifies on unpack).
func TestLayoutDigests(t *testing.T) {
	var buf bytes.Buffer
	res, err := Write(&buf, testImage(t))
	if err != nil {
		t.Fatal(err)
	}
	files := readTar(t, buf.Bytes())
	for name, data := range files {
		if strings.HasPrefix(name, "blobs/sha256/") && data != nil {
			if got := sha(data); got != "sha256:"+strings.TrimPrefix(name, "blobs/sha256/") {
				t.Errorf("blob %s has digest %s", name, got)
			}
		}
	}
	var idx index
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Manifests) != 1 || idx.Manifests[0].Digest != res.Manifest.Digest {
		t.Fatalf("index %+v does not point at manifest %s", idx, res.Manifest.Digest)
	}
	if got := idx.Manifests[0].Annotations[AnnotationImageName]; got != "skiff.local/test:v1" {
		t.Errorf("image name annotation %q", got)
	}
	if got := idx.Manifests[0].Annotations[AnnotationRefName]; got != "v1" {
		t.Errorf("ref name annotation %q", got)
	}
	var man manifest
	if err := json.Unmarshal(files[blobPath(res.Manifest.Digest)], &man); err != nil {
		t.Fatal(err)
	}
	var cfg imageConfig
	if err := json.Unmarshal(files[blobPath(man.Config.Digest)], &cfg); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(files[blobPath(man.Layers[0].Digest)]))
	if err != nil {
		t.Fatal(err)
	}
	layer, _ := io.ReadAll(zr)
	if cfg.RootFS.DiffIDs[0] != sha(layer) || res.DiffID != sha(layer) {
		t.Errorf("diff_id %s, uncompressed layer %s", cfg.RootFS.DiffIDs[0], sha(layer))
	}
	if cfg.OS != "linux" || cfg.Config.Entrypoint[0] != "/usr/bin/app" {
		t.Errorf("config %+v", cfg)
	}
	root := readTar(t, layer)
	for _, want := range []string{"usr/", "usr/bin/", "usr/bin/app", "tmp/", "bin/"} {
		if _, ok := root[want]; !ok {
			t.Errorf("layer lacks %s (has %v)", want, keys(root))
		}
	}
	if got := string(root["bin/other"]); got != "-> /usr/bin/app" {
		t.Errorf("symlink bin/other: %q", got)
	}
}

func TestDeterministic(t *testing.T) {
	img := testImage(t)
	var a, b bytes.Buffer
	if _, err := Write(&a, img); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(&b, img); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two builds of the same image differ")
	}
}

// containerd's own importer (the code behind client.Import) accepts the
// tarball and finds the named image.
func TestContainerdImporterAccepts(t *testing.T) {
	var buf bytes.Buffer
	res, err := Write(&buf, testImage(t))
	if err != nil {
		t.Fatal(err)
	}
	store, err := local.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	desc, err := archive.ImportIndex(ctx, store, &buf)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := images.Children(ctx, store, desc)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx) != 1 || idx[0].Digest.String() != res.Manifest.Digest {
		t.Fatalf("imported index children %v", idx)
	}
	for _, d := range []string{res.Config.Digest, res.Layer.Digest} {
		if _, err := content.ReadBlob(ctx, store, descriptorOf(t, store, d)); err != nil {
			t.Errorf("blob %s missing after import: %v", d, err)
		}
	}
}

func TestValidate(t *testing.T) {
	if _, err := Write(io.Discard, Image{Name: "x"}); err == nil {
		t.Error("no files: want an error")
	}
	img := testImage(t)
	img.Files[0].Dst = "relative"
	if _, err := Write(io.Discard, img); err == nil {
		t.Error("relative destination: want an error")
	}
}

func TestTagOf(t *testing.T) {
	for ref, want := range map[string]string{
		"skiff.local/httpecho:v1":  "v1",
		"localhost:5000/app":       "latest",
		"app@sha256:abc":           "latest",
		"localhost:5000/app:1.2.3": "1.2.3",
	} {
		if got := tagOf(ref); got != want {
			t.Errorf("tagOf(%q) = %q, want %q", ref, got, want)
		}
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func descriptorOf(t *testing.T, store content.Store, d string) ocispec.Descriptor {
	t.Helper()
	info, err := store.Info(context.Background(), godigest.Digest(d))
	if err != nil {
		t.Fatal(err)
	}
	return ocispec.Descriptor{Digest: info.Digest, Size: info.Size}
}
