package main

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What kubectl cp runs: "tar cf - /src" in one container and "tar -xmf - -C dir" in another.
func TestTarRoundTripAsKubectlCpRunsIt(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "d", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "d", "sub", "f.txt"), []byte("hello\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/f.txt", filepath.Join(src, "d", "link")); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := runTar([]string{"cf", "-", filepath.Join(src, "d")}, nil, &archive); err != nil {
		t.Fatal(err)
	}
	// Names carry no leading slash, as GNU tar writes them and kubectl's untar expects.
	tr := tar.NewReader(bytes.NewReader(archive.Bytes()))
	h, err := tr.Next()
	if err != nil || h.Name != strings.TrimLeft(filepath.Join(src, "d"), "/")+"/" {
		t.Fatalf("first entry: %+v %v", h, err)
	}
	if err := runTar([]string{"--no-same-permissions", "--no-same-owner", "-xmf", "-", "-C", dst}, &archive, nil); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dst, strings.TrimLeft(filepath.Join(src, "d"), "/"))
	got, err := os.ReadFile(filepath.Join(base, "link"))
	if err != nil || string(got) != "hello\n" {
		t.Fatalf("through the symlink: %q %v", got, err)
	}
	if st, err := os.Stat(filepath.Join(base, "sub", "f.txt")); err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("mode: %v %v", st, err)
	}
	if runTest([]string{"-d", base}) != 0 || runTest([]string{"-d", filepath.Join(base, "link")}) != 1 || runTest([]string{"-x", base}) != 2 {
		t.Fatal("test -d")
	}
}

func TestTarRefusesWhatItDoesNotDo(t *testing.T) {
	for _, args := range [][]string{{"cf", "out.tar", "x"}, {"-xzf", "-"}, {"cf", "-"}, {"f", "-"}, {"--gzip", "-xf", "-"}} {
		if err := runTar(args, strings.NewReader(""), &bytes.Buffer{}); err == nil {
			t.Errorf("tar %q: no error", args)
		}
	}
	var evil bytes.Buffer
	tw := tar.NewWriter(&evil)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "../escape", Size: 1, Mode: 0o644})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	dir := t.TempDir()
	if err := runTar([]string{"-xmf", "-", "-C", filepath.Join(dir, "in")}, &evil, nil); err == nil {
		t.Fatal("extracted ../escape")
	}
	if _, err := os.Stat(filepath.Join(dir, "escape")); err == nil {
		t.Fatal("../escape written outside the directory")
	}
}
