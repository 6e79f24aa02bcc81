package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// multiCall runs the tool httpecho was started as through a symlink (/bin/tar, /bin/test in
// the image): what kubectl cp runs in a container, in an image with no shell or tar of its own.
func multiCall(name string, args []string) (code int, ok bool) {
	switch name {
	case "tar":
		if err := runTar(args, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "tar:", err)
			return 2, true
		}
		return 0, true
	case "test":
		return runTest(args), true
	}
	return 0, false
}

// tarOpts are the GNU tar options kubectl cp uses: c or x, f - (the archive is stdin or
// stdout), m (do not restore times), -C DIR, and the --no-same-* flags (this tar never sets
// owners or keeps more than the permission bits anyway).
type tarOpts struct {
	create, extract, keepTime bool
	dir                       string
	paths                     []string
}

func parseTar(args []string) (tarOpts, error) {
	o := tarOpts{dir: ".", keepTime: true}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--no-same-permissions" || a == "--no-same-owner":
		case a == "-C":
			if i++; i == len(args) {
				return o, errors.New("-C needs a directory")
			}
			o.dir = args[i]
		case i == 0 || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(a) > 1):
			var err error
			if i, err = o.letters(strings.TrimPrefix(a, "-"), args, i); err != nil {
				return o, err
			}
		case strings.HasPrefix(a, "-"):
			return o, fmt.Errorf("option %s is not supported", a)
		default:
			o.paths = append(o.paths, a)
		}
	}
	if o.create == o.extract {
		return o, errors.New("one of c (create) or x (extract) is required")
	}
	if o.create && len(o.paths) == 0 {
		return o, errors.New("create needs at least one path")
	}
	return o, nil
}

// letters reads bundled options like "xmf" or "cf"; f takes the next argument, which must be -.
func (o *tarOpts) letters(s string, args []string, i int) (int, error) {
	for _, c := range s {
		switch c {
		case 'c':
			o.create = true
		case 'x':
			o.extract = true
		case 'm':
			o.keepTime = false
		case 'v':
		case 'f':
			if i++; i == len(args) || args[i] != "-" {
				return i, errors.New("f: only - (stdin or stdout) is supported")
			}
		default:
			return i, fmt.Errorf("option %c is not supported", c)
		}
	}
	return i, nil
}

func runTar(args []string, in io.Reader, out io.Writer) error {
	o, err := parseTar(args)
	if err != nil {
		return err
	}
	if o.create {
		tw := tar.NewWriter(out)
		for _, p := range o.paths {
			path := p
			if !filepath.IsAbs(p) {
				path = filepath.Join(o.dir, p)
			}
			if err := addTree(tw, path, strings.TrimLeft(filepath.Clean(p), "/")); err != nil {
				return err
			}
		}
		return tw.Close()
	}
	return extract(tar.NewReader(in), o.dir, o.keepTime)
}

// addTree writes path and what is under it, named as name (no leading slash, as GNU tar).
func addTree(tw *tar.Writer, path, name string) error {
	return filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(path, p)
		h.Name = filepath.ToSlash(filepath.Join(name, rel))
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
}

// extract writes the archive under dir, refusing names that would land outside it.
func extract(tr *tar.Reader, dir string, keepTime bool) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("%s: the name leaves the target directory", h.Name)
		}
		dst := filepath.Join(dir, name)
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, mode|0o700)
		case tar.TypeReg:
			err = writeFile(dst, tr, mode)
		case tar.TypeSymlink:
			_ = os.Remove(dst)
			err = os.Symlink(h.Linkname, dst)
		default:
			err = fmt.Errorf("%s: entry type %q is not supported", h.Name, h.Typeflag)
		}
		if err != nil {
			return err
		}
		if keepTime && h.Typeflag != tar.TypeSymlink {
			_ = os.Chtimes(dst, time.Now(), h.ModTime)
		}
	}
}

func writeFile(dst string, r io.Reader, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runTest is test(1)'s file checks: -e, -f, -d; 0 true, 1 false, 2 a usage error.
func runTest(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "test: only -e, -f or -d with one path is supported")
		return 2
	}
	st, err := os.Stat(args[1])
	var ok bool
	switch args[0] {
	case "-e":
		ok = err == nil
	case "-f":
		ok = err == nil && st.Mode().IsRegular()
	case "-d":
		ok = err == nil && st.IsDir()
	default:
		fmt.Fprintf(os.Stderr, "test: %s is not supported\n", args[0])
		return 2
	}
	if ok {
		return 0
	}
	return 1
}
