package lb

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/skiff-sh/skiff/bpf/pinnedlink"
	"golang.org/x/sys/unix"
)

// pinnedMaps are every map the hooks use: the LRU ones too, so ClientIP
// affinity and UDP reverse translation survive a restart.
var pinnedMaps = []string{"services", "backends", "members", "affinity", "udp_fwd", "udp_rev"}

func pinSpec(spec *ebpf.CollectionSpec, dir string) (*ebpf.CollectionOptions, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lb: pin path: %w", err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return nil, fmt.Errorf("lb: pin path: %w", err)
	}
	if fs.Type != unix.BPF_FS_MAGIC {
		return nil, fmt.Errorf("lb: pin path %s is not on a bpffs (mount -t bpf bpf <dir>)", dir)
	}
	for _, name := range pinnedMaps {
		spec.Maps[name].Pinning = ebpf.PinByName
	}
	return &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: dir}}, nil
}

// linkDir is where the links of one cgroup are pinned: a hash keeps any
// cgroup path a single short file name.
func (d *Dataplane) linkDir(cgroupPath string) string {
	sum := sha256.Sum256([]byte(cgroupPath))
	return filepath.Join(d.pinPath, "links", hex.EncodeToString(sum[:8]))
}

func (d *Dataplane) attachOne(path string, h hook) (link.Link, error) {
	attach := func() (link.Link, error) {
		return link.AttachCgroup(link.CgroupOptions{Path: path, Attach: h.at, Program: h.prog})
	}
	if d.pinPath == "" {
		return attach()
	}
	dir := d.linkDir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// A pinned link on another cgroup: ours was deleted and made again.
	return pinnedlink.Attach(filepath.Join(dir, h.name), h.prog, func(l link.Link) bool { return sameCgroup(l, path) }, attach)
}

// sameCgroup reports whether l is attached to the cgroup at path (a
// cgroup2 directory's inode number is its cgroup ID).
func sameCgroup(l link.Link, path string) bool {
	info, err := l.Info()
	if err != nil || info.Cgroup() == nil {
		return false
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return false
	}
	return info.Cgroup().CgroupId == st.Ino
}

// UnpinLinks removes the pins of every link: closing them then detaches them.
func UnpinLinks(ls []link.Link) error {
	var errs []error
	for _, l := range ls {
		errs = append(errs, l.Unpin())
	}
	return errors.Join(errs...)
}

// recover rebuilds the Go-side cache from maps an earlier Load pinned, and
// sweeps what a crash in the middle of an Upsert could have left behind:
// slots of no live generation and members of no live set.
func (d *Dataplane) recover() error {
	dumps, err := dumpMaps(d.objs.Services, d.objs.Backends)
	if err != nil {
		return fmt.Errorf("lb: adopt pinned maps: %w", err)
	}
	live := map[uint32]uint32{} // rev -> count
	members := map[sockLbMemberKey]bool{}
	var maxRev uint32
	for _, sd := range dumps {
		d.svcs[sd.Key] = &svcState{rev: sd.Rev, backends: sd.Backends, affSec: uint32(sd.AffinityTimeout.Seconds())}
		live[sd.Rev] = uint32(len(sd.Backends))
		maxRev = max(maxRev, sd.Rev)
		for _, b := range sd.Backends {
			members[sockLbMemberKey{Svc: sd.Key.raw(), Be: b.raw()}] = true
		}
	}
	slotLive := func(sk sockLbSlotKey, _ sockLbBackend) bool {
		n, ok := live[sk.Rev]
		return ok && sk.Idx < n
	}
	memberLive := func(mk sockLbMemberKey, _ uint8) bool { return members[mk] }
	if err := errors.Join(Sweep(d.objs.Backends, slotLive), Sweep(d.objs.Members, memberLive)); err != nil {
		return fmt.Errorf("lb: adopt pinned maps: %w", err)
	}
	d.revs = revAlloc{next: maxRev}
	for r := uint32(1); r <= maxRev; r++ {
		if _, ok := live[r]; !ok {
			d.revs.free = append(d.revs.free, r)
		}
	}
	return nil
}

// DumpPinned reads the Services from maps pinned at dir by a running proxy
// (read-only; like Dump, but with no Dataplane of its own).
func DumpPinned(dir string) ([]ServiceDump, error) {
	ro := &ebpf.LoadPinOptions{ReadOnly: true}
	svcs, err := ebpf.LoadPinnedMap(filepath.Join(dir, "services"), ro)
	if err != nil {
		return nil, fmt.Errorf("lb: %w", err)
	}
	defer svcs.Close()
	bes, err := ebpf.LoadPinnedMap(filepath.Join(dir, "backends"), ro)
	if err != nil {
		return nil, fmt.Errorf("lb: %w", err)
	}
	defer bes.Close()
	return dumpMaps(svcs, bes)
}
