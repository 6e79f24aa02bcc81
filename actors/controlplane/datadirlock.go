package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LockFile in the data dir is held (flock, exclusive) by the one process whose embedded NATS
// owns the JetStream store there: two JetStream servers on one store directory corrupt it.
// It holds "pid=N started=RFC3339" of the holder, for the error the next process prints.
const LockFile = "skiff.lock"

// ErrDataDirLocked is wrapped by the error of a process that found the data dir in use.
var ErrDataDirLocked = errors.New("data dir is in use by another process")

// dirLock is a held data-dir lock; the kernel drops it when the process exits, however it ends.
type dirLock struct{ f *os.File }

// lockDataDir takes the lock without waiting. The pid and start time are written only after
// the lock is held, so a loser never truncates the holder's record.
func lockDataDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked by %s; stop that process or use another --data-dir", ErrDataDirLocked, path, holder(f))
		}
		return nil, fmt.Errorf("data dir lock %s: %w", path, err)
	}
	record := fmt.Sprintf("pid=%d started=%s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(record), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir lock %s: %w", path, err)
	}
	return &dirLock{f: f}, nil
}

// holder describes the process named in the lock file.
func holder(f *os.File) string {
	b := make([]byte, 256)
	n, _ := f.ReadAt(b, 0)
	rec := strings.TrimSpace(string(b[:n]))
	if rec == "" {
		return "a process that has not yet written its pid" // it won the lock a moment ago
	}
	return "the process with " + rec
}

// release drops the lock (Stop); the record stays, it names the last holder.
func (l *dirLock) release() {
	if l != nil {
		_ = l.f.Close()
	}
}

// LockDataDir takes the same lock for a process that opens a JetStream store in dir without
// a ControlPlane (skiff nats); call release once the store is closed.
func LockDataDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	l, err := lockDataDir(dir)
	if err != nil {
		return nil, err
	}
	return l.release, nil
}
