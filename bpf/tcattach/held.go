package tcattach

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Holds reports whether h holds the program id exactly as Attach(m, h, prog) leaves it: a
// link pinned at h.Pin on h's interface (tcx) or h's filter (legacy), with nothing of the
// other mode at h. The kernel is asked, not a record kept here, so an interface deleted and
// made again with the same index does not pass for one that holds the program.
func Holds(m Mode, h Hook, id ebpf.ProgramID) (bool, error) {
	pinned, err := pinnedProgram(h)
	if err != nil || (m == TCX && pinned != id) {
		return false, err
	}
	filter, err := filterProgram(h)
	if err != nil {
		return false, err
	}
	if m == TCX {
		return filter == 0, nil
	}
	return filter == id && pinned == 0, nil
}

// ProgramID is the kernel's id of prog, what Holds compares.
func ProgramID(prog *ebpf.Program) (ebpf.ProgramID, error) {
	info, err := prog.Info()
	if err != nil {
		return 0, fmt.Errorf("program info: %w", err)
	}
	id, ok := info.ID()
	if !ok {
		return 0, errors.New("program info: the kernel reports no program id")
	}
	return id, nil
}

// pinnedProgram is the program of the link pinned at h.Pin if that link is on h's interface,
// else 0.
func pinnedProgram(h Hook) (ebpf.ProgramID, error) {
	l, info, err := pinned(h)
	if l == nil || err != nil {
		return 0, err
	}
	defer l.Close()
	if !onInterface(info, h) {
		return 0, nil
	}
	return info.Program, nil
}

// pinned opens the link pinned at h.Pin and reads its info; no pin is a nil link.
func pinned(h Hook) (link.Link, *link.Info, error) {
	if h.Pin == "" {
		return nil, nil, nil
	}
	l, err := link.LoadPinnedLink(h.Pin, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open pinned link %s: %w", h.Pin, err)
	}
	info, err := l.Info()
	if err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("pinned link %s: %w", h.Pin, err)
	}
	return l, info, nil
}

// filterProgram is the program of h's legacy filter (its name at its priority), else 0.
func filterProgram(h Hook) (ebpf.ProgramID, error) {
	if h.Name == "" {
		return 0, nil
	}
	fs, err := Filters(h.Ifindex, h.Egress)
	if err != nil {
		if gone(err) {
			return 0, nil
		}
		return 0, err
	}
	for _, f := range fs {
		if f.Priority == h.Priority && f.Name == h.Name {
			return ebpf.ProgramID(f.ProgID), nil
		}
	}
	return 0, nil
}

// DropStale removes h's pin when its link is no longer on h's interface: the interface was
// deleted, the kernel detached the link and only the pin kept it. A pin whose link is on the
// interface stays, even when the interface is a new one that got the deleted one's index and
// was attached meanwhile. Legacy filters need nothing: they go with their interface.
func DropStale(h Hook) error {
	l, info, err := pinned(h)
	if l == nil || err != nil {
		return err
	}
	defer l.Close()
	if onInterface(info, h) {
		return nil
	}
	if err := l.Unpin(); err != nil {
		return fmt.Errorf("unpin %s: %w", h.Pin, err)
	}
	return nil
}
