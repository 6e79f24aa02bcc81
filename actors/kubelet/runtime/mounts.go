package runtime

import (
	"fmt"
	"sort"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// unmountUnder detaches every mount at or below dir (a pod's memory-backed volumes), deepest
// first, so removing the pod's files removes them and never reaches into another filesystem.
func unmountUnder(dir string) error {
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return err
	}
	sort.Slice(ms, func(i, j int) bool { return len(ms[i].Mountpoint) > len(ms[j].Mountpoint) })
	for _, m := range ms {
		if err := unix.Unmount(m.Mountpoint, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
			return fmt.Errorf("unmount %s: %w", m.Mountpoint, err)
		}
	}
	return nil
}
