package volumes

import (
	"fmt"
	"os"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// mountTmpfs makes dir a tmpfs (of at most size bytes when size > 0) unless it is one already,
// so an adopted pod's memory-backed volume keeps its contents.
func mountTmpfs(dir string, size int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if ok, err := mountinfo.Mounted(dir); err != nil || ok {
		return err
	}
	opts := "mode=0755"
	if size > 0 {
		opts += fmt.Sprintf(",size=%d", size)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}
