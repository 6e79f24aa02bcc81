package volumes_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/skiff-sh/skiff/actors/kubelet/volumes"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func dataTarget(t *testing.T, dir string) string {
	t.Helper()
	l, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestWritePayloadLayoutAndUpdate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	if err := volumes.WritePayload(dir, map[string]volumes.File{
		"a":          {Data: []byte("one"), Mode: 0o644},
		"nested/b":   {Data: []byte("two"), Mode: 0o400},
		"nested/c/d": {Data: []byte("three"), Mode: 0o600},
	}); err != nil {
		t.Fatal(err)
	}
	first := dataTarget(t, dir)
	if !strings.HasPrefix(first, "..20") {
		t.Fatalf("..data -> %q, want a timestamped dir", first)
	}
	for link, want := range map[string]string{"a": "..data/a", "nested": "..data/nested"} {
		if got, err := os.Readlink(filepath.Join(dir, link)); err != nil || got != want {
			t.Fatalf("%s -> %q (%v), want %q", link, got, err, want)
		}
	}
	if got := read(t, filepath.Join(dir, "nested/c/d")); got != "three" {
		t.Fatalf("nested/c/d = %q", got)
	}
	if st, _ := os.Stat(filepath.Join(dir, "nested/b")); st.Mode().Perm() != 0o400 {
		t.Fatalf("nested/b mode %v, want 0400", st.Mode().Perm())
	}

	// The same payload again changes nothing.
	if err := volumes.WritePayload(dir, map[string]volumes.File{
		"a": {Data: []byte("one"), Mode: 0o644}, "nested/b": {Data: []byte("two"), Mode: 0o400}, "nested/c/d": {Data: []byte("three"), Mode: 0o600},
	}); err != nil {
		t.Fatal(err)
	}
	if got := dataTarget(t, dir); got != first {
		t.Fatalf("an unchanged payload was rewritten: ..data %q -> %q", first, got)
	}

	// A changed value, a changed mode and a dropped key: a new data dir, the old one removed.
	if err := volumes.WritePayload(dir, map[string]volumes.File{"a": {Data: []byte("uno"), Mode: 0o640}, "e": {Data: []byte("new"), Mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	second := dataTarget(t, dir)
	if second == first {
		t.Fatal("a changed payload kept the old data dir")
	}
	if _, err := os.Lstat(filepath.Join(dir, first)); !os.IsNotExist(err) {
		t.Fatalf("old data dir %s still there: %v", first, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nested")); !os.IsNotExist(err) {
		t.Fatalf("dropped top-level name still visible: %v", err)
	}
	if got := read(t, filepath.Join(dir, "a")); got != "uno" {
		t.Fatalf("a = %q after update", got)
	}
	if st, _ := os.Stat(filepath.Join(dir, "a")); st.Mode().Perm() != 0o640 {
		t.Fatalf("a mode %v, want 0640", st.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 4 { // ..data, the data dir, a, e
		t.Fatalf("volume dir holds %v", names)
	}
}

func TestWritePayloadRefusesEscapingPaths(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"../x", "/etc/passwd", "a/../../x", "..data", ""} {
		if err := volumes.WritePayload(dir, map[string]volumes.File{p: {Data: []byte("x"), Mode: 0o644}}); err == nil {
			t.Errorf("path %q accepted", p)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a refused payload wrote %d entries", len(ents))
	}
}

// A reader never sees files of two versions at once: both keys are swapped together.
func TestWritePayloadSwapIsAtomic(t *testing.T) {
	dir := t.TempDir()
	write := func(i int) {
		v := []byte(fmt.Sprint(i))
		if err := volumes.WritePayload(dir, map[string]volumes.File{"x": {Data: v, Mode: 0o644}, "y": {Data: v, Mode: 0o644}}); err != nil {
			t.Error(err)
		}
	}
	write(0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var torn, reads int
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Resolve ..data once, as a reader holding an open directory would.
			ts, err := os.Readlink(filepath.Join(dir, "..data"))
			if err != nil {
				continue
			}
			x, errX := os.ReadFile(filepath.Join(dir, ts, "x"))
			y, errY := os.ReadFile(filepath.Join(dir, ts, "y"))
			if errX == nil && errY == nil {
				reads++
				if string(x) != string(y) {
					torn++
				}
			}
		}
	}()
	for i := 1; i <= 200; i++ {
		write(i)
	}
	close(stop)
	wg.Wait()
	if torn > 0 || reads == 0 {
		t.Fatalf("%d of %d reads saw two versions", torn, reads)
	}
	if got := read(t, filepath.Join(dir, "x")); got != "200" {
		t.Fatalf("x = %q, want 200", got)
	}
}
