// Package demo carries the example image inside the skiff binary, so `skiff up` runs
// deploy/examples/web.yaml with nothing built or pulled first. httpecho.tar is
// examples.BuildHTTPEcho's output (a reproducible build), remade by `go generate
// ./deploy/images/demo`; the package's test fails when httpecho's source changed since
// (httpecho.source records its digest and the Go version that built it) or, with that Go
// version, the bytes differ.
package demo

import (
	"bytes"
	_ "embed" // the image tarball
	"os"
	"path/filepath"
)

//go:generate go run ./gen

// HTTPEcho is the skiff.local/httpecho:v1 image as an OCI tarball.
//
//go:embed httpecho.tar
var HTTPEcho []byte

// Source is "DIGEST GOVERSION": the httpecho source HTTPEcho was built from
// (examples.HTTPEchoSource) and the toolchain that built it.
//
//go:embed httpecho.source
var Source string

// Write puts the image into dir as httpecho.tar (an agent's images directory), leaving an
// identical file alone so a restart rewrites nothing.
func Write(dir string) error {
	path := filepath.Join(dir, "httpecho.tar")
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, HTTPEcho) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, HTTPEcho, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
