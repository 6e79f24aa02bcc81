package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/skiff-sh/skiff/schemas"
)

// manifest is one decoded document and where it came from.
type manifest struct {
	source string
	doc    schemas.Document
}

// readManifests reads -f FILE|DIR|- (a directory: every .yaml, .yml and .json in it, sorted).
func readManifests(paths []string) ([]manifest, error) {
	var out []manifest
	for _, p := range paths {
		files, err := expand(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			var data []byte
			if f == "-" {
				data, err = io.ReadAll(os.Stdin)
			} else {
				data, err = os.ReadFile(f)
			}
			if err != nil {
				return nil, err
			}
			docs, err := schemas.DecodeManifests(data)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			for _, d := range docs {
				out = append(out, manifest{source: f, doc: d})
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no objects found in %s", strings.Join(paths, ", "))
	}
	return out, nil
}

func expand(p string) ([]string, error) {
	if p == "-" {
		return []string{p}, nil
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	var files []string
	err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, path)
			}
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}
