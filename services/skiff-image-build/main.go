// Command skiff-image-build writes a FROM scratch OCI image-layout tarball
// from local files, for airgapped import into containerd (no registry, no
// docker):
//
//	skiff-image-build -o out.tar -name skiff.local/httpecho:v1 -binary ./httpecho
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/skiff-sh/skiff/internal/ocibuild"
)

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var (
		out        = flag.String("o", "", "output tarball (required)")
		name       = flag.String("name", "", "image reference, e.g. skiff.local/httpecho:v1 (required)")
		binary     = flag.String("binary", "", "executable copied to /<basename> and used as the entrypoint")
		workdir    = flag.String("workdir", "", "working directory")
		user       = flag.String("user", "", "user[:group] to run as")
		files, env list
		cmd, ports list
		links      list
		entrypoint list
	)
	flag.Var(&files, "file", "extra file SRC:DST (repeatable)")
	flag.Var(&env, "env", "KEY=VALUE (repeatable)")
	flag.Var(&entrypoint, "entrypoint", "entrypoint argument (repeatable; default: the -binary)")
	flag.Var(&cmd, "cmd", "default argument (repeatable)")
	flag.Var(&ports, "port", "exposed port, e.g. 8080/tcp (repeatable)")
	flag.Var(&links, "symlink", "symlink LINK:TARGET, e.g. /bin/tar:/httpecho for a multi-call binary (repeatable)")
	flag.Parse()

	img := ocibuild.Image{Name: *name, Env: env, Cmd: cmd, Ports: ports, WorkingDir: *workdir, User: *user,
		Entrypoint: entrypoint, Dirs: []string{"/tmp", "/etc"}}
	if *binary != "" {
		dst := "/" + filepath.Base(*binary)
		img.Files = append(img.Files, ocibuild.File{Src: *binary, Dst: dst, Mode: 0o755})
		if len(img.Entrypoint) == 0 {
			img.Entrypoint = []string{dst}
		}
	}
	for _, f := range files {
		src, dst, ok := strings.Cut(f, ":")
		if !ok {
			fail("-file %q: want SRC:DST", f)
		}
		img.Files = append(img.Files, ocibuild.File{Src: src, Dst: dst})
	}
	for _, l := range links {
		link, target, ok := strings.Cut(l, ":")
		if !ok || link == "" || target == "" {
			fail("-symlink %q: want LINK:TARGET", l)
		}
		if img.Symlinks == nil {
			img.Symlinks = map[string]string{}
		}
		img.Symlinks[link] = target
	}
	if *out == "" || *name == "" {
		flag.Usage()
		os.Exit(2)
	}
	res, err := ocibuild.WriteFile(*out, img)
	if err != nil {
		fail("%v", err)
	}
	fmt.Printf("%s %s -> %s\n", *name, res.Manifest.Digest, *out)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "skiff-image-build: "+format+"\n", args...)
	os.Exit(1)
}
