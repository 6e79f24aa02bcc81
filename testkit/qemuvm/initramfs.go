package qemuvm

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Initramfs collects the files of an initramfs and writes it as one newc cpio archive.
// Paths are absolute paths inside the VM; parent directories are added on Write.
type Initramfs struct {
	files map[string]file
}

type file struct {
	mode   uint32 // full st_mode: type and permission bits
	data   []byte // content of a generated file or a symlink's target
	source string // host file copied at Write time (big binaries are not held in memory)
}

const (
	modeDir     = 0o040000
	modeRegular = 0o100000
	modeSymlink = 0o120000
	modeType    = 0o170000
)

// NewInitramfs returns an empty image.
func NewInitramfs() *Initramfs { return &Initramfs{files: map[string]file{}} }

func clean(p string) string { return path.Clean("/" + p) }

// NewBusybox returns an image with the static busybox at /bin/busybox (its applets are
// linked by `busybox --install -s` in /init) and the /etc files a small userland expects.
func NewBusybox() (*Initramfs, error) {
	r := NewInitramfs()
	if err := r.Copy("/bin/busybox", busybox); err != nil {
		return nil, fmt.Errorf("busybox (apt-get install busybox-static): %w", err)
	}
	for _, d := range []string{"/proc", "/sys", "/dev", "/run", "/tmp", "/sbin", "/usr/bin", "/usr/sbin", "/root"} {
		r.Dir(d)
	}
	r.Symlink("/var/run", "/run")
	r.File("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"))
	r.File("/etc/group", 0o644, []byte("root:x:0:\n"))
	r.File("/etc/hosts", 0o644, []byte("127.0.0.1 localhost\n"))
	r.File("/etc/resolv.conf", 0o644, nil)
	return r, nil
}

// Dir adds an (empty) directory.
func (r *Initramfs) Dir(p string) { r.files[clean(p)] = file{mode: modeDir | 0o755} }

// File adds a file with the given content and permissions.
func (r *Initramfs) File(p string, perm os.FileMode, data []byte) {
	r.files[clean(p)] = file{mode: modeRegular | uint32(perm.Perm()), data: data}
}

// Symlink adds a symbolic link at p pointing to target.
func (r *Initramfs) Symlink(p, target string) {
	r.files[clean(p)] = file{mode: modeSymlink | 0o777, data: []byte(target)}
}

// Copy adds the host file src at dst, keeping its permissions; symlinks are followed.
func (r *Initramfs) Copy(dst, src string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	r.files[clean(dst)] = file{mode: modeRegular | uint32(st.Mode().Perm()), source: src}
	return nil
}

// CopyTree adds every regular file under the host directory src below dst.
func (r *Initramfs) CopyTree(dst, src string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		return r.Copy(path.Join(dst, filepath.ToSlash(rel)), p)
	})
}

// Binary adds the host executable src at dst with the shared libraries it links against
// (found with ldd, at the same paths as on the host, so the dynamic loader finds them).
func (r *Initramfs) Binary(dst, src string) error {
	if err := r.Copy(dst, src); err != nil {
		return err
	}
	libs, err := sharedLibs(src)
	if err != nil {
		return err
	}
	for _, l := range libs {
		if err := r.Copy(l, l); err != nil {
			return err
		}
	}
	return nil
}

// sharedLibs lists the absolute paths of the libraries ldd resolves for bin; none for a
// static binary.
func sharedLibs(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") || strings.Contains(string(out), "statically linked") {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %v: %s", bin, err, out)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"): // the loader itself
			libs = append(libs, f[0])
		case len(f) >= 3 && f[1] == "=>" && f[2] == "not":
			return nil, fmt.Errorf("ldd %s: %s not found", bin, f[0])
		}
	}
	return libs, nil
}

// Modules adds the named kernel modules of kernel version kver and everything they depend on
// (modules.dep under modDir, normally /lib/modules/<kver>, plus the "pre:" soft dependencies
// of modules.softdep that modprobe would load first, e.g. libcrc32c's crc32c implementation,
// resolved through modules.alias) at /lib/modules/<kver>, and
// returns their paths relative to that directory in an order insmod can load them in.
// A name that is built into the kernel needs nothing and is skipped.
func (r *Initramfs) Modules(modDir, kver string, names ...string) ([]string, error) {
	deps, err := readModulesDep(filepath.Join(modDir, "modules.dep"))
	if err != nil {
		return nil, err
	}
	builtin, _ := os.ReadFile(filepath.Join(modDir, "modules.builtin"))
	byName := map[string]string{}
	for p := range deps {
		byName[moduleName(p)] = p
	}
	aliases := readModulesConf(filepath.Join(modDir, "modules.alias"), "alias")
	softPre := map[string][]string{}
	for mod, rest := range readModulesConf(filepath.Join(modDir, "modules.softdep"), "softdep") {
		for _, r := range rest {
			if pre, ok := strings.CutPrefix(r, "pre: "); ok {
				softPre[mod] = append(softPre[mod], strings.Fields(strings.Split(pre, "post:")[0])...)
			}
		}
	}
	// resolve maps a module name or alias to module paths; nil if built in or unknown.
	resolve := func(n string) []string {
		if p, ok := byName[strings.ReplaceAll(n, "-", "_")]; ok {
			return []string{p}
		}
		var out []string
		for _, m := range aliases[n] {
			if p, ok := byName[strings.ReplaceAll(m, "-", "_")]; ok {
				out = append(out, p)
			}
		}
		return out
	}
	var order []string
	seen := map[string]bool{}
	var visit func(p string)
	visit = func(p string) {
		if seen[p] {
			return
		}
		seen[p] = true
		for _, soft := range softPre[moduleName(p)] {
			for _, sp := range resolve(soft) {
				visit(sp)
			}
		}
		for _, d := range deps[p] {
			visit(d)
		}
		order = append(order, p)
	}
	for _, n := range names {
		p, ok := byName[strings.ReplaceAll(n, "-", "_")]
		if !ok {
			if strings.Contains(string(builtin), "/"+n+".ko") {
				continue
			}
			return nil, fmt.Errorf("kernel module %q: not in %s/modules.dep", n, modDir)
		}
		visit(p)
	}
	for _, p := range order {
		if !strings.HasSuffix(p, ".ko") {
			return nil, fmt.Errorf("kernel module %s is compressed; busybox insmod needs plain .ko", p)
		}
		if err := r.Copy(path.Join("/lib/modules", kver, p), filepath.Join(modDir, p)); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// moduleName is the name a module path is known by: file name without .ko*, "-" as "_".
func moduleName(p string) string {
	base := path.Base(p)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// readModulesConf reads the "<keyword> <name> <rest>" lines of modules.alias or
// modules.softdep into rest by name; a missing file is empty.
func readModulesConf(p, keyword string) map[string][]string {
	out := map[string][]string{}
	b, err := os.ReadFile(p)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) == 3 && f[0] == keyword {
			name := f[1]
			if keyword == "softdep" {
				name = strings.ReplaceAll(name, "-", "_")
			}
			out[name] = append(out[name], strings.TrimSpace(f[2]))
		}
	}
	return out
}

// readModulesDep parses depmod's "path: dep dep ..." lines.
func readModulesDep(p string) (map[string][]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	deps := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		mod, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
	}
	return deps, sc.Err()
}

// Write writes the archive to path p.
func (r *Initramfs) Write(p string) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := r.write(bw); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// write writes the archive: directories before what they hold, in sorted order.
func (r *Initramfs) write(w io.Writer) error {
	all := map[string]file{}
	for p, f := range r.files {
		all[p] = f
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = file{mode: modeDir | 0o755}
			}
		}
	}
	paths := make([]string, 0, len(all))
	for p := range all {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	c := &cpioWriter{w: w}
	for _, p := range paths {
		f := all[p]
		switch {
		case f.source != "":
			st, err := os.Stat(f.source)
			if err != nil {
				return err
			}
			c.entry(p, f.mode, st.Size(), func(w io.Writer) error {
				src, err := os.Open(f.source)
				if err != nil {
					return err
				}
				defer src.Close()
				_, err = io.Copy(w, src)
				return err
			})
		case f.mode&modeType == modeDir:
			c.entry(p, f.mode, 0, nil)
		default:
			data := f.data
			c.entry(p, f.mode, int64(len(data)), func(w io.Writer) error {
				_, err := w.Write(data)
				return err
			})
		}
	}
	return c.close()
}
