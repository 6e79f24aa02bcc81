// Package tcattach puts SchedCLS programs on the ingress or egress of an interface: with tcx
// links where the kernel has them (Linux 6.6), else with legacy tc, a clsact qdisc and a
// direct-action cls_bpf filter (as Cilium does on older kernels). Which one is probed once
// per process. Attaching again replaces what an earlier attach (of this or a previous
// process, in either mode) left, so a restarted agent never stacks a second copy.
package tcattach

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/skiff-sh/skiff/bpf/pinnedlink"
	"golang.org/x/sys/unix"
)

// Mode is how programs are attached.
type Mode string

const (
	TCX    Mode = "tcx" // bpf_link per program (kernel 6.6+); links stack in attach order
	Legacy Mode = "tc"  // clsact qdisc + cls_bpf filter; filters run in priority order
)

// ForceLegacyEnv, set to 1, makes Detect answer Legacy on a kernel with tcx. Tests only: it
// lets the legacy path run where CI's kernels have tcx.
const ForceLegacyEnv = "SKIFF_TEST_TC_LEGACY"

var detect = sync.OnceValues(probe)

// Detect reports the mode this kernel supports, probed on the first call.
func Detect() (Mode, error) { return detect() }

// probe asks the kernel for a tcx link on an interface that cannot exist: a kernel with tcx
// answers ENODEV, one without it rejects the attach type.
func probe() (Mode, error) {
	if os.Getenv(ForceLegacyEnv) == "1" {
		return Legacy, nil
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.SchedCLS,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()},
	})
	if err != nil {
		return "", fmt.Errorf("tc attach probe: load a classifier: %w", err)
	}
	defer prog.Close()
	l, err := link.AttachTCX(link.TCXOptions{Interface: math.MaxInt32, Program: prog, Attach: ebpf.AttachTCXIngress})
	switch {
	case err == nil:
		l.Close()
		return TCX, nil
	case errors.Is(err, ebpf.ErrNotSupported):
		return Legacy, nil
	case errors.Is(err, unix.ENODEV):
		return TCX, nil
	}
	return "", fmt.Errorf("tc attach probe: %w", err)
}

// Hook is one place a program goes, and how the attachment is named so it can be found again.
type Hook struct {
	Ifindex int
	Egress  bool
	// Pin is where a tcx link is pinned (on a bpffs): it outlives the process and a later
	// Attach updates it in place. Empty: the attachment lasts until Close.
	Pin string
	// Name and Priority identify the legacy filter: a filter of another name at Priority is
	// left alone and the attach fails.
	Name     string
	Priority uint16
}

func (h Hook) side() string {
	if h.Egress {
		return "egress"
	}
	return "ingress"
}

func (h Hook) attachType() ebpf.AttachType {
	if h.Egress {
		return ebpf.AttachTCXEgress
	}
	return ebpf.AttachTCXIngress
}

// Attachment is a program attached at a Hook.
type Attachment struct {
	hook Hook
	mode Mode
	link link.Link // tcx only
}

// Attach puts prog at h in mode m, replacing an attachment an earlier Attach left at h in
// either mode.
func Attach(m Mode, h Hook, prog *ebpf.Program) (*Attachment, error) {
	var err error
	a := &Attachment{hook: h, mode: m}
	switch m {
	case TCX:
		if a.link, err = attachTCX(h, prog); err == nil {
			// Left by a legacy attach before (a forced test mode, a kernel upgrade).
			err = deleteFilter(h)
			if err != nil {
				a.link.Close()
			}
		}
	case Legacy:
		if err = replaceFilter(h, prog); err == nil && h.Pin != "" {
			err = unpinLink(h.Pin)
		}
	default:
		err = fmt.Errorf("unknown mode %q", m)
	}
	if err != nil {
		return nil, fmt.Errorf("attach %s to interface %d %s: %w", m, h.Ifindex, h.side(), err)
	}
	return a, nil
}

func attachTCX(h Hook, prog *ebpf.Program) (link.Link, error) {
	attach := func() (link.Link, error) {
		return link.AttachTCX(link.TCXOptions{Interface: h.Ifindex, Program: prog, Attach: h.attachType()})
	}
	if h.Pin == "" {
		return attach()
	}
	// A pinned link on another interface means ours is gone (its index was reused): so is the link.
	return pinnedlink.Attach(h.Pin, prog, func(l link.Link) bool {
		info, err := l.Info()
		return err == nil && onInterface(info, h)
	}, attach)
}

// onInterface reports whether a link is a tcx link on h's interface and side. The kernel
// detaches a tcx link when its interface is deleted and then reports interface 0 for it.
func onInterface(info *link.Info, h Hook) bool {
	tcx := info.TCX()
	return tcx != nil && int(tcx.Ifindex) == h.Ifindex && ebpf.AttachType(tcx.AttachType) == h.attachType()
}

// Close releases the process's hold: a pinned attachment stays, an unpinned one is detached.
func (a *Attachment) Close() error {
	if a.mode == TCX {
		return a.link.Close()
	}
	if a.hook.Pin == "" {
		return deleteFilter(a.hook)
	}
	return nil
}

// Detach removes the attachment for good, pinned or not.
func (a *Attachment) Detach() error {
	if a.mode == TCX {
		err := a.link.Detach()
		if a.hook.Pin != "" {
			err = errors.Join(err, a.link.Unpin())
		}
		return errors.Join(err, a.link.Close())
	}
	return deleteFilter(a.hook)
}

// unpinLink detaches the link pinned at pin and removes the pin. The detach is explicit: a
// link whose last reference goes is released by the kernel later, not at once.
func unpinLink(pin string) error {
	l, err := link.LoadPinnedLink(pin, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open pinned link %s: %w", pin, err)
	}
	defer l.Close()
	if err := l.Detach(); err != nil && !errors.Is(err, unix.ENOLINK) {
		return fmt.Errorf("detach pinned link %s: %w", pin, err)
	}
	return l.Unpin()
}

// DetachAll undoes a user's attaches in either mode, for a teardown: the tcx links pinned in
// linksDir (DetachPinned) and the legacy filters named with filterPrefix (RemoveFilters), so
// it also takes what an earlier run in the other mode left.
func DetachAll(linksDir, filterPrefix string) error {
	return errors.Join(DetachPinned(linksDir), RemoveFilters(filterPrefix))
}

// DetachPinned detaches and unpins every link pinned in dir; a missing dir holds none.
func DetachPinned(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		errs = append(errs, unpinLink(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}

// Programs lists the ids of the programs on one side of an interface: by tcx link and by
// legacy filter, apart.
func Programs(ifindex int, egress bool) (tcx, tc []ebpf.ProgramID, err error) {
	res, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: Hook{Egress: egress}.attachType()})
	switch {
	case err == nil:
		for _, p := range res.Programs {
			tcx = append(tcx, p.ID)
		}
	case !errors.Is(err, unix.EINVAL) && !errors.Is(err, ebpf.ErrNotSupported): // EINVAL: no tcx
		return nil, nil, fmt.Errorf("query tcx programs of interface %d: %w", ifindex, err)
	}
	fs, err := Filters(ifindex, egress)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range fs {
		tc = append(tc, ebpf.ProgramID(f.ProgID))
	}
	return tcx, tc, nil
}
