// Package ocibuild writes single-layer OCI images (the FROM scratch
// equivalent) as OCI image-layout tarballs that containerd's Import and
// `docker load` accept, so Skiff needs neither a registry nor docker to
// produce its example images. Output is deterministic: same inputs, same
// digests.
package ocibuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Media types and annotations from the OCI image spec (and containerd's
// image-name annotation, which Import prefers over the bare tag).
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"

	AnnotationRefName   = "org.opencontainers.image.ref.name"
	AnnotationImageName = "io.containerd.image.name"
)

// File is one file copied into the image.
type File struct {
	Src  string      // path on the build machine
	Dst  string      // absolute path in the image
	Mode os.FileMode // permission bits; 0 keeps the source's
}

// Image describes what to build.
type Image struct {
	Name  string // full reference, e.g. skiff.local/httpecho:v1
	Files []File
	Dirs  []string // extra empty directories (mode 0755; /tmp gets 1777)
	// Symlinks maps an absolute path in the image to its target: a multi-call binary's names.
	Symlinks   map[string]string
	Entrypoint []string
	Cmd        []string
	Env        []string // KEY=VALUE
	WorkingDir string
	User       string
	Ports      []string // exposed ports, e.g. 8080/tcp
	Labels     map[string]string
	OS, Arch   string    // default linux / the build machine's GOARCH
	Created    time.Time // default the Unix epoch, for reproducible digests
}

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *Platform         `json:"platform,omitempty"`
}

// Platform of a manifest in the index.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
}

type imageConfig struct {
	Created      string    `json:"created"`
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Config       runConfig `json:"config"`
	RootFS       struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

type runConfig struct {
	User         string              `json:"User,omitempty"`
	Env          []string            `json:"Env,omitempty"`
	Entrypoint   []string            `json:"Entrypoint,omitempty"`
	Cmd          []string            `json:"Cmd,omitempty"`
	WorkingDir   string              `json:"WorkingDir,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
	Labels       map[string]string   `json:"Labels,omitempty"`
}

// Result names what was written.
type Result struct {
	Manifest Descriptor // its digest is the image's identity
	Config   Descriptor
	Layer    Descriptor
	DiffID   string // digest of the uncompressed layer
}

// WriteFile builds img into an OCI image-layout tarball at path.
func WriteFile(path string, img Image) (Result, error) {
	f, err := os.Create(path)
	if err != nil {
		return Result{}, err
	}
	res, err := Write(f, img)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
	}
	return res, err
}

// Write builds img and writes the OCI image-layout tarball to w.
func Write(w io.Writer, img Image) (Result, error) {
	if err := img.validate(); err != nil {
		return Result{}, err
	}
	created := img.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	created = created.UTC()

	layerTar, err := buildLayer(img, created)
	if err != nil {
		return Result{}, err
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if _, err := zw.Write(layerTar); err != nil {
		return Result{}, err
	}
	if err := zw.Close(); err != nil {
		return Result{}, err
	}
	layer := gz.Bytes()

	var res Result
	res.DiffID = digest(layerTar)
	res.Layer = Descriptor{MediaType: MediaTypeLayer, Digest: digest(layer), Size: int64(len(layer))}

	osName, arch := img.OS, img.Arch
	if osName == "" {
		osName = "linux"
	}
	if arch == "" {
		arch = runtime.GOARCH
	}
	cfg := imageConfig{Created: created.Format(time.RFC3339), Architecture: arch, OS: osName}
	cfg.Config = runConfig{User: img.User, Env: img.Env, Entrypoint: img.Entrypoint, Cmd: img.Cmd,
		WorkingDir: img.WorkingDir, Labels: img.Labels}
	if len(img.Ports) > 0 {
		cfg.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range img.Ports {
			cfg.Config.ExposedPorts[p] = struct{}{}
		}
	}
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = []string{res.DiffID}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return Result{}, err
	}
	res.Config = Descriptor{MediaType: MediaTypeConfig, Digest: digest(cfgJSON), Size: int64(len(cfgJSON))}

	manJSON, err := json.Marshal(manifest{SchemaVersion: 2, MediaType: MediaTypeManifest, Config: res.Config,
		Layers: []Descriptor{res.Layer}})
	if err != nil {
		return Result{}, err
	}
	res.Manifest = Descriptor{MediaType: MediaTypeManifest, Digest: digest(manJSON), Size: int64(len(manJSON))}

	top := res.Manifest
	top.Platform = &Platform{Architecture: arch, OS: osName}
	top.Annotations = map[string]string{AnnotationImageName: img.Name, AnnotationRefName: tagOf(img.Name)}
	idxJSON, err := json.Marshal(index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: []Descriptor{top}})
	if err != nil {
		return Result{}, err
	}

	tw := tar.NewWriter(w)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", idxJSON},
		{blobPath(res.Layer.Digest), layer},
		{blobPath(res.Config.Digest), cfgJSON},
		{blobPath(res.Manifest.Digest), manJSON},
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: created}); err != nil {
			return Result{}, err
		}
	}
	for _, e := range entries {
		if err := writeBytes(tw, e.name, e.data, 0o644, created); err != nil {
			return Result{}, err
		}
	}
	return res, tw.Close()
}

func (img Image) validate() error {
	if img.Name == "" {
		return fmt.Errorf("ocibuild: image name is required")
	}
	if len(img.Files) == 0 {
		return fmt.Errorf("ocibuild: at least one file is required")
	}
	for _, f := range img.Files {
		if !path.IsAbs(f.Dst) {
			return fmt.Errorf("ocibuild: destination %q must be absolute", f.Dst)
		}
	}
	for l := range img.Symlinks {
		if !path.IsAbs(l) {
			return fmt.Errorf("ocibuild: symlink %q must be absolute", l)
		}
	}
	return nil
}

// buildLayer writes the root filesystem tar: parent directories first, in
// sorted order, with fixed ownership and times so digests are reproducible.
func buildLayer(img Image, mtime time.Time) ([]byte, error) {
	dirs := map[string]bool{}
	addParents := func(p string) {
		for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range img.Dirs {
		d = path.Clean("/" + d)
		dirs[d] = true
		addParents(d)
	}
	files := append([]File(nil), img.Files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Dst < files[j].Dst })
	for _, f := range files {
		addParents(path.Clean(f.Dst))
	}
	links := make([]string, 0, len(img.Symlinks))
	for l := range img.Symlinks {
		links = append(links, l)
		addParents(path.Clean(l))
	}
	sort.Strings(links)
	sortedDirs := make([]string, 0, len(dirs))
	for d := range dirs {
		sortedDirs = append(sortedDirs, d)
	}
	sort.Strings(sortedDirs)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range sortedDirs {
		mode := int64(0o755)
		if d == "/tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/",
			Mode: mode, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f.Src)
		if err != nil {
			return nil, fmt.Errorf("ocibuild: %w", err)
		}
		mode := f.Mode.Perm()
		if mode == 0 {
			st, err := os.Stat(f.Src)
			if err != nil {
				return nil, err
			}
			mode = st.Mode().Perm()
		}
		if err := writeBytes(tw, strings.TrimPrefix(path.Clean(f.Dst), "/"), data, int64(mode), mtime); err != nil {
			return nil, err
		}
	}
	for _, l := range links {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(path.Clean(l), "/"),
			Linkname: img.Symlinks[l], Mode: 0o777, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeBytes(tw *tar.Writer, name string, data []byte, mode int64, mtime time.Time) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)),
		ModTime: mtime, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(d string) string { return "blobs/sha256/" + strings.TrimPrefix(d, "sha256:") }

// tagOf returns the tag of a reference ("latest" when it has none).
func tagOf(ref string) string {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:]
	}
	return "latest"
}
