package volumes

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File is one file of a projected volume's payload.
type File struct {
	Data []byte
	Mode os.FileMode // permission bits
}

// The layout AtomicWriter keeps in a volume's directory, as Kubernetes' kubelet does: the data
// lives in a timestamped directory, ..data is a symlink to it, and each visible top-level name
// is a symlink through ..data. Replacing ..data (rename over it) swaps every file at once, so a
// reader sees the old set or the new one, never a mix.
const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
)

// WritePayload makes dir hold exactly payload (relative paths -> files). Nothing is written
// when dir already holds it; otherwise a new timestamped directory is filled and swapped in,
// and the old one and the names no longer in payload are removed.
func WritePayload(dir string, payload map[string]File) error {
	for p := range payload {
		if err := validPath(p); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	oldTS, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var oldPaths map[string]bool
	if oldTS != "" {
		if oldPaths, err = payloadPaths(filepath.Join(dir, oldTS)); err != nil {
			return err
		}
		if same(filepath.Join(dir, oldTS), oldPaths, payload) {
			return nil
		}
	}
	ts, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return err
	}
	if err := writeFiles(ts, payload); err != nil {
		_ = os.RemoveAll(ts)
		return err
	}
	if err := os.Chmod(ts, 0o755); err != nil { // MkdirTemp makes it 0700
		return err
	}
	tmp := filepath.Join(dir, newDataDirName)
	_ = os.Remove(tmp) // a leftover of a crash between symlink and rename
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataDirName)); err != nil {
		return err
	}
	if err := linkVisible(dir, payload); err != nil {
		return err
	}
	if err := unlinkGone(dir, oldPaths, payload); err != nil {
		return err
	}
	if oldTS != "" {
		return os.RemoveAll(filepath.Join(dir, oldTS))
	}
	return nil
}

// validPath refuses paths that could leave the volume or clash with the layout's own names.
func validPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("invalid path: must not be empty")
	case filepath.IsAbs(p):
		return fmt.Errorf("invalid path %q: must be relative", p)
	case strings.HasPrefix(p, ".."):
		return fmt.Errorf("invalid path %q: must not start with '..'", p)
	}
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return fmt.Errorf("invalid path %q: must not contain '..'", p)
		}
	}
	return nil
}

// payloadPaths lists the files under a data directory by relative path.
func payloadPaths(root string) (map[string]bool, error) {
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out[rel] = true
		}
		return nil
	})
	return out, err
}

// same reports whether the data directory holds payload exactly, contents and modes.
func same(root string, have map[string]bool, payload map[string]File) bool {
	if len(have) != len(payload) {
		return false
	}
	for p, f := range payload {
		if !have[filepath.Clean(p)] {
			return false
		}
		full := filepath.Join(root, p)
		st, err := os.Lstat(full)
		if err != nil || st.Mode().Perm() != f.Mode.Perm() {
			return false
		}
		b, err := os.ReadFile(full)
		if err != nil || !bytes.Equal(b, f.Data) {
			return false
		}
	}
	return true
}

func writeFiles(root string, payload map[string]File) error {
	for p, f := range payload {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, f.Data, f.Mode.Perm()); err != nil {
			return err
		}
		if err := os.Chmod(full, f.Mode.Perm()); err != nil { // WriteFile's mode is umasked
			return err
		}
	}
	return nil
}

// topLevel is the first element of a relative path: the name visible in the volume.
func topLevel(p string) string {
	return strings.SplitN(filepath.Clean(p), "/", 2)[0]
}

// linkVisible makes each top-level name of payload a symlink through ..data.
func linkVisible(dir string, payload map[string]File) error {
	for p := range payload {
		name := topLevel(p)
		link := filepath.Join(dir, name)
		target := filepath.Join(dataDirName, name)
		if cur, err := os.Readlink(link); err == nil && cur == target {
			continue
		}
		_ = os.Remove(link) // a symlink of an earlier layout
		if err := os.Symlink(target, link); err != nil {
			return err
		}
	}
	return nil
}

// unlinkGone removes the visible names that were in the old payload and are not in the new.
func unlinkGone(dir string, old map[string]bool, payload map[string]File) error {
	keep := map[string]bool{}
	for p := range payload {
		keep[topLevel(p)] = true
	}
	for p := range old {
		name := topLevel(p)
		if keep[name] {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
			return err
		}
		keep[name] = true // removed once
	}
	return nil
}
