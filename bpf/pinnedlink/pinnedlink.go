// Package pinnedlink keeps a BPF link pinned on a bpffs across process restarts: a later
// process updates the pinned link's program in place, so the hook is never empty.
package pinnedlink

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Attach makes prog the program of the link pinned at pin. A pinned link for which same
// still holds (it is attached where this one goes) gets prog in one atomic update; one that
// no longer does (its interface or cgroup was deleted and made again) is dropped, and attach
// makes a new link, which is pinned at pin. The pin's directory must exist.
func Attach(pin string, prog *ebpf.Program, same func(link.Link) bool, attach func() (link.Link, error)) (link.Link, error) {
	if l, err := link.LoadPinnedLink(pin, nil); err == nil {
		if same(l) {
			if err := l.Update(prog); err != nil {
				l.Close()
				return nil, fmt.Errorf("update pinned link: %w", err)
			}
			return l, nil
		}
		_ = l.Unpin()
		l.Close()
	}
	l, err := attach()
	if err != nil {
		return nil, err
	}
	if err := l.Pin(pin); err != nil {
		l.Close()
		return nil, fmt.Errorf("pin link: %w", err)
	}
	return l, nil
}
