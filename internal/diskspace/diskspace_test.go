package diskspace_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/internal/diskspace"
	"github.com/skiff-sh/skiff/testkit/needs"
)

// The guard on a small tmpfs: the reserve file holds its space, growing writes are refused
// below the floor, a shrinking write gets the reserve back on a full disk, and once space
// returns the reserve is taken again and growing writes pass.
func TestGuardFloorAndReserve(t *testing.T) {
	if os.Geteuid() != 0 {
		needs.Skip(t, "mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=32m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	const minFree, reserve = 8 << 20, 4 << 20
	g, err := diskspace.New(diskspace.Config{Dir: dir, MinFree: minFree, Reserve: reserve})
	if err != nil {
		t.Fatal(err)
	}
	reservePath := filepath.Join(dir, diskspace.ReserveFile)
	if st, err := os.Stat(reservePath); err != nil || st.Size() != reserve {
		t.Fatalf("reserve file: %v %v, want %d bytes", st, err, reserve)
	}
	if err := g.Grow(); err != nil {
		t.Fatalf("Grow on an empty disk: %v", err)
	}
	// Fill to ENOSPC.
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()
	if err := g.Grow(); !errors.Is(err, diskspace.ErrInsufficientStorage) {
		t.Fatalf("Grow on a full disk: %v, want ErrInsufficientStorage", err)
	}
	if err := g.Check(); err == nil {
		t.Fatal("Check on a full disk: nil")
	}
	g.Shrink()
	if _, err := os.Stat(reservePath); !os.IsNotExist(err) {
		t.Fatalf("reserve after Shrink on a full disk: %v, want it released", err)
	}
	if got, err := diskspace.Free(dir); err != nil || got < reserve {
		t.Fatalf("free after Shrink: %d (%v), want at least the reserve %d", got, err, reserve)
	}
	if err := g.Grow(); !errors.Is(err, diskspace.ErrInsufficientStorage) {
		t.Fatalf("Grow with only the reserve free: %v, want refused", err)
	}
	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	if err := g.Grow(); err != nil {
		t.Fatalf("Grow after space returned: %v", err)
	}
	if st, err := os.Stat(reservePath); err != nil || st.Size() != reserve {
		t.Fatalf("reserve after space returned: %v %v, want %d bytes again", st, err, reserve)
	}
}
