package controlplane

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestDataDirLock(t *testing.T) {
	dir := t.TempDir()
	l, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to an open file: a second open in this process is refused too.
	_, err = lockDataDir(dir)
	want := fmt.Sprintf("is locked by the process with pid=%d started=", os.Getpid())
	if !errors.Is(err, ErrDataDirLocked) || !strings.Contains(err.Error(), want) {
		t.Fatalf("second lock: %v, want ErrDataDirLocked naming %q", err, want)
	}
	l.release()
	l2, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.release()
}
