package lbbench

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// benchCgroup is a child of a privately mounted cgroup2 hierarchy. The
// eBPF hooks attach to it, and the bench process moves into it only while it
// measures eBPF connects (cgroup.procs moves a whole process; the hooks only
// touch ClusterIPs nobody else uses).
type benchCgroup struct {
	mount, child, home string
}

func newCgroup() (*benchCgroup, error) {
	mnt, err := os.MkdirTemp("", "skiff-lbbench-cg")
	if err != nil {
		return nil, err
	}
	if err := unix.Mount("none", mnt, "cgroup2", 0, ""); err != nil {
		os.Remove(mnt)
		return nil, fmt.Errorf("mount cgroup2: %w", err)
	}
	cg := &benchCgroup{mount: mnt, child: filepath.Join(mnt, fmt.Sprintf("skiff-lbbench-%d", os.Getpid()))}
	if cg.home, err = ownCgroup(); err == nil {
		err = os.Mkdir(cg.child, 0o755)
	}
	if err != nil {
		cg.close()
		return nil, err
	}
	return cg, nil
}

// ownCgroup is this process's path in the cgroup2 hierarchy ("0::/path").
func ownCgroup() (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("process has no cgroup2 membership")
}

func movePid(dir string) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
}

func (c *benchCgroup) enter() error { return movePid(c.child) }
func (c *benchCgroup) leave() error { return movePid(filepath.Join(c.mount, c.home)) }

func (c *benchCgroup) close() error {
	err := errors.Join(c.leave(), os.Remove(c.child))
	if e := unix.Unmount(c.mount, unix.MNT_DETACH); e != nil {
		return errors.Join(err, e)
	}
	return errors.Join(err, os.Remove(c.mount))
}
