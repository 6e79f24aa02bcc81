package natsserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// StreamSync makes the acknowledged writes of one file stream of this embedded server durable
// with group commit. nats-server's sync_always fsyncs each message on its own, one after the
// other in the stream's ingest loop, so concurrent writers queue behind each other's fsync.
// Instead, the server stores without syncing (the message is in the file, not yet on the
// disk, when JetStream acknowledges it) and each writer calls Sync after the ack: one fsync
// of the stream's files covers every write acknowledged before it started, so the writers
// that arrive while one fsync runs share the next.
//
// It knows the file store's layout (<store>/<account>/streams/<stream>/msgs/<n>.blk, new
// writes only in the highest block) and syncs the rest (meta files, directories, blocks a
// compaction rewrote) in the first round and on SyncAll.
type StreamSync struct {
	store, stream string

	mu         sync.Mutex
	started    uint64        // rounds started
	done       uint64        // rounds finished
	running    bool          // a round is running
	wake       chan struct{} // closed when a round finishes
	errAt      uint64        // the last round that failed, and its error
	err        error
	full       bool // the next round syncs everything
	joined     int  // Syncs waiting for the next round to start
	lastShared bool // the last round covered more than one

	fmu     sync.Mutex  // held by a round, and by Close
	closed  bool        // Close was called
	dir     string      // the stream's directory, found in the first round
	lastBlk int         // the highest block the last round synced
	top     *os.File    // that block, kept open
	topInfo os.FileInfo // which file top is
}

// StreamSync returns the syncer of stream (any account), closed by Shutdown. It is for a
// server without SyncAlways: with it the server has synced each write itself.
func (s *Server) StreamSync(stream string) *StreamSync {
	y := &StreamSync{store: s.StoreDir(), stream: stream, wake: make(chan struct{}), full: true}
	s.mu.Lock()
	s.syncs = append(s.syncs, y)
	s.mu.Unlock()
	return y
}

// Sync returns once every write the server acknowledged before the call is on stable
// storage, or the error of the fsync that should have put it there.
func (y *StreamSync) Sync(ctx context.Context) error { return y.sync(ctx, false) }

// SyncAll is Sync that also syncs the blocks the server rewrote without syncing (a
// compaction or purge), and every directory and meta file of the stream.
func (y *StreamSync) SyncAll(ctx context.Context) error { return y.sync(ctx, true) }

func (y *StreamSync) sync(ctx context.Context, all bool) error {
	y.mu.Lock()
	if all {
		y.full = true
	}
	// A round that starts after this call covers its writes.
	need := y.started + 1
	y.joined++
	for y.done < need {
		if !y.running {
			y.running = true
			if y.lastShared {
				// The server acknowledges in bursts (an fsync holds its writes back): let the
				// writers acknowledged with this one join the round, not wait for the next.
				y.mu.Unlock()
				runtime.Gosched()
				y.mu.Lock()
			}
			y.started++
			y.lastShared, y.joined = y.joined > 1, 0
			round, full := y.started, y.full
			y.full = false
			y.mu.Unlock()
			err := y.fsync(full)
			y.mu.Lock()
			y.running = false
			y.done = round
			if err != nil {
				y.errAt, y.err = round, err
				y.full = true // what that round missed, the next syncs
			}
			close(y.wake)
			y.wake = make(chan struct{})
			continue
		}
		wake := y.wake
		y.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
		y.mu.Lock()
	}
	defer y.mu.Unlock()
	if y.errAt >= need {
		return fmt.Errorf("natsserver: fsync of stream %s: %w", y.stream, y.err)
	}
	return nil
}

// Rounds is how many fsync rounds have finished: fewer than the Syncs when writers shared.
func (y *StreamSync) Rounds() uint64 {
	y.mu.Lock()
	defer y.mu.Unlock()
	return y.done
}

// fsync runs one round; only one runs at a time. A round syncs the highest block through a
// kept descriptor; only when the server has started a new block (or after a failure, or on
// SyncAll) does it list and sync more.
func (y *StreamSync) fsync(full bool) error {
	y.fmu.Lock()
	defer y.fmu.Unlock()
	if y.closed {
		return errors.New("closed")
	}
	if !full && y.top != nil && y.topIsCurrent() {
		return y.top.Sync()
	}
	return y.fsyncBlocks(full)
}

// topIsCurrent reports whether the kept block is still the highest and still the file at its
// name (a compaction replaces a block by renaming a new file over it).
func (y *StreamSync) topIsCurrent() bool {
	if _, err := os.Stat(y.blockPath(y.lastBlk + 1)); !errors.Is(err, os.ErrNotExist) {
		return false
	}
	fi, err := os.Stat(y.blockPath(y.lastBlk))
	return err == nil && os.SameFile(fi, y.topInfo)
}

func (y *StreamSync) fsyncBlocks(full bool) error {
	if y.dir == "" {
		dirs, err := filepath.Glob(filepath.Join(y.store, "*", "streams", y.stream))
		if err != nil {
			return err
		}
		if len(dirs) != 1 {
			return fmt.Errorf("stream %s: %d directories under %s", y.stream, len(dirs), y.store)
		}
		y.dir = dirs[0]
	}
	msgs := filepath.Join(y.dir, "msgs")
	blks, err := blocks(msgs)
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range blks {
		// The block before the highest may have taken writes since the last round.
		if full || b >= y.lastBlk {
			errs = append(errs, syncPath(y.blockPath(b)))
		}
	}
	errs = append(errs, syncPath(msgs)) // a new block's name
	if full {
		errs = append(errs, syncTree(y.dir), syncPath(filepath.Dir(y.dir)), syncPath(filepath.Dir(filepath.Dir(y.dir))))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(blks) > 0 {
		return y.keep(blks[len(blks)-1])
	}
	return nil
}

// keep opens block n as the one the next rounds sync. It was synced by name just before, so
// a file renamed over it meanwhile fails the next round's topIsCurrent and is synced then.
func (y *StreamSync) keep(n int) error {
	if y.top != nil {
		_ = y.top.Close()
		y.top = nil
	}
	f, err := os.Open(y.blockPath(n))
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return err
	}
	y.lastBlk, y.top, y.topInfo = n, f, fi
	return nil
}

func (y *StreamSync) blockPath(n int) string {
	return filepath.Join(y.dir, "msgs", strconv.Itoa(n)+".blk")
}

// Close releases the kept descriptor; a Sync after it fails.
func (y *StreamSync) Close() error {
	y.fmu.Lock()
	defer y.fmu.Unlock()
	y.closed = true
	if y.top == nil {
		return nil
	}
	err := y.top.Close()
	y.top = nil
	return err
}

// blocks lists the message blocks' numbers in ascending order.
func blocks(msgs string) ([]int, error) {
	es, err := os.ReadDir(msgs)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // no message yet
	}
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range es {
		if n, ok := strings.CutSuffix(e.Name(), ".blk"); ok {
			if i, err := strconv.Atoi(n); err == nil {
				out = append(out, i)
			}
		}
	}
	slices.Sort(out) // ReadDir sorts by name: "10.blk" before "9.blk"
	return out, nil
}

// syncTree fsyncs every file and directory under dir (dir included).
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil // removed meanwhile (a temporary file)
		}
		if err != nil {
			return err
		}
		return syncPath(p)
	})
}

func syncPath(p string) error {
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil // a block compacted away, a temporary file renamed
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
