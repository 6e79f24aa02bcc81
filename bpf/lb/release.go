package lb

import (
	"errors"
	"io"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Held is what a dataplane (this package's, the nodeport one) holds in the kernel, for
// Release to let go of.
type Held struct {
	Links   map[string][]link.Link // by attachment point (cgroup, interface)
	Pinned  []*ebpf.Map            // the maps pinned under PinDir
	PinDir  string                 // "" when nothing is pinned
	Closers []io.Closer            // programs, maps, iterators: closed after the links
}

// Release closes everything h holds. Pinned links and maps stay in the kernel and keep
// serving until the next Load adopts them, unless remove is set: then every pin is deleted
// first, so closing detaches the links and frees the maps. It is the one shape of every
// dataplane's Close and Remove; the caller holds its lock and marks itself closed.
func Release(h Held, remove bool) error {
	var errs []error
	if remove && h.PinDir != "" {
		for _, ls := range h.Links {
			errs = append(errs, UnpinLinks(ls))
		}
		for _, m := range h.Pinned {
			errs = append(errs, m.Unpin())
		}
		errs = append(errs, os.RemoveAll(h.PinDir))
	}
	for _, ls := range h.Links {
		errs = append(errs, CloseLinks(ls))
	}
	for _, c := range h.Closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
