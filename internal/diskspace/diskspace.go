// Package diskspace keeps a store that cannot survive a full disk off a full disk. JetStream's
// file store turns the first "no space left on device" into a write error it keeps returning
// until the store is reopened (a restart), so the disk must never fill under it: a Guard
// refuses growing writes while free space is below a floor, and holds a reserve file whose
// space it hands back when something else fills the disk, so that deletes and compaction
// (the writes that free space) and the store's own bookkeeping still fit.
package diskspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrInsufficientStorage is wrapped by every refusal of a growing write.
var ErrInsufficientStorage = errors.New("insufficient storage")

// ReserveFile is the reserve's name in Config.Dir.
const ReserveFile = ".skiff-disk-reserve"

// Defaults: a write's body is at most a few MiB and JetStream rewrites a message block (8 MiB
// at most) when it compacts one, so this much room always fits the writes in flight.
const (
	DefaultMinFree = 64 << 20
	DefaultReserve = 32 << 20
)

// Config says which filesystem to guard.
type Config struct {
	Dir     string // a directory on it; the reserve file is kept here
	MinFree uint64 // growing writes are refused while less is free; default DefaultMinFree
	Reserve uint64 // size of the reserve file; default DefaultReserve
	// Poll is how often Run looks at the free space, so that the reserve is handed back even
	// while no write arrives; default 100ms (one statfs).
	Poll time.Duration
}

// Guard decides which writes the filesystem has room for.
type Guard struct {
	cfg  Config
	path string

	mu       sync.Mutex
	reserved bool // the reserve file holds its space
}

// New creates the reserve file if there is room for it (else the guard starts without one
// and creates it once space returns).
func New(cfg Config) (*Guard, error) {
	if cfg.Dir == "" {
		return nil, errors.New("diskspace: Config.Dir is required")
	}
	if cfg.MinFree == 0 {
		cfg.MinFree = DefaultMinFree
	}
	if cfg.Reserve == 0 {
		cfg.Reserve = DefaultReserve
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 100 * time.Millisecond
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	g := &Guard{cfg: cfg, path: filepath.Join(cfg.Dir, ReserveFile)}
	if st, err := os.Stat(g.path); err == nil && uint64(st.Size()) >= cfg.Reserve {
		g.reserved = true // kept from the last run
	}
	if _, err := g.adjust(false); err != nil {
		return nil, err
	}
	return g, nil
}

// Grow is asked before a write that adds data: nil when there is room for it, else a
// *FullError that says how much is free.
func (g *Guard) Grow() error {
	free, err := g.adjust(false)
	if err != nil {
		return err
	}
	if free < g.cfg.MinFree {
		return &FullError{Dir: g.cfg.Dir, Free: free, MinFree: g.cfg.MinFree}
	}
	return nil
}

// FullError is Grow's refusal; it is ErrInsufficientStorage.
type FullError struct {
	Dir           string
	Free, MinFree uint64
}

func (e *FullError) Error() string {
	return fmt.Sprintf("%s has %s free, below the %s kept for deletes and compaction; delete objects or free space on the disk",
		e.Dir, mib(e.Free), mib(e.MinFree))
}

func (e *FullError) Is(target error) bool { return target == ErrInsufficientStorage }

// Shrink is asked before a write on the way to freeing space (a delete, a compaction): it
// never refuses, but hands back the reserve first if the disk is nearly full.
func (g *Guard) Shrink() { _, _ = g.adjust(true) }

// Check is Grow for readiness probes: nil while growing writes are accepted.
func (g *Guard) Check() error { return g.Grow() }

// Run keeps the reserve in step with the free space until ctx ends: it takes the reserve
// again once space returns, and hands it back when the disk stays nearly full while no delete
// arrives, for the store's own writes. "Stays": two polls in a row, so that whatever filled
// the disk has hit the end and stopped, and does not eat the reserve too.
func (g *Guard) Run(ctx context.Context) {
	t := time.NewTicker(g.cfg.Poll)
	defer t.Stop()
	low := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			free, err := g.adjust(low)
			low = err == nil && free < headroom
		}
	}
}

// headroom: with less free, the disk counts as full and the reserve is handed back. JetStream
// rewrites a message block (up to 8 MiB) when it compacts one.
const headroom = 8 << 20

// adjust hands the reserve back when release is asked and less than headroom is free, takes
// it again once the floor and the reserve both fit, and returns the free space after that.
func (g *Guard) adjust(release bool) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	free, err := Free(g.cfg.Dir)
	if err != nil {
		return 0, fmt.Errorf("diskspace: %w", err)
	}
	switch {
	case g.reserved && release && free < headroom:
		if err := os.Remove(g.path); err != nil && !os.IsNotExist(err) {
			return free, fmt.Errorf("diskspace: release reserve: %w", err)
		}
		g.reserved = false
		return Free(g.cfg.Dir)
	case !g.reserved && free >= g.cfg.MinFree+g.cfg.Reserve:
		if err := allocate(g.path, g.cfg.Reserve); err != nil {
			_ = os.Remove(g.path) // space taken meanwhile: try again later
			return Free(g.cfg.Dir)
		}
		g.reserved = true
		return Free(g.cfg.Dir)
	}
	return free, nil
}

// allocate makes path a file of size bytes whose blocks are allocated, not a sparse hole.
func allocate(path string, size uint64) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	err = unix.Fallocate(int(f.Fd()), 0, 0, int64(size))
	if errors.Is(err, unix.EOPNOTSUPP) {
		err = fill(f, size) // filesystems without fallocate
	}
	if err != nil {
		return err
	}
	return f.Sync()
}

func fill(f *os.File, size uint64) error {
	buf := make([]byte, 1<<20)
	for n := uint64(0); n < size; n += uint64(len(buf)) {
		if _, err := f.Write(buf[:min(uint64(len(buf)), size-n)]); err != nil {
			return err
		}
	}
	return nil
}

// Free is the space on dir's filesystem that unprivileged writers may still use, as df
// shows it.
func Free(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// Size is the size of dir's filesystem.
func Size(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Blocks * uint64(st.Bsize), nil
}

func mib(b uint64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }
