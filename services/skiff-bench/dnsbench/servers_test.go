package dnsbench

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A copied binary is the same bytes, and evicting it leaves none of its pages in the page
// cache, so the server started from it maps only what its own run reads.
func TestCopyThenEvictLeavesNothingCached(t *testing.T) {
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("the temporary directory is on tmpfs, whose pages are the file itself and are never evicted")
	}
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := copyBin(src, dst); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the copy differs from its source")
	}
	if st, err := os.Stat(dst); err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("copy's mode: %v %v, want 0755", st.Mode(), err)
	}
	if err := unix.Fsync(mustOpen(t, dst)); err != nil { // dirty pages are not evicted
		t.Fatal(err)
	}
	if n := cachedPages(t, dst); n == 0 {
		t.Fatal("a file just written and read has no pages cached: this check proves nothing here")
	}
	if err := evict(dst); err != nil {
		t.Fatal(err)
	}
	if n := cachedPages(t, dst); n != 0 {
		t.Fatalf("%d pages still cached after evict", n)
	}
}

func mustOpen(t *testing.T, p string) int {
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}

// cachedPages maps p and counts its pages in the page cache (mincore); mapping reads nothing.
func cachedPages(t *testing.T, p string) int {
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(mustOpen(t, p), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
