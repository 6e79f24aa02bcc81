package lb

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// Dataplane owns the loaded programs and maps. All methods are safe for
// concurrent use.
type Dataplane struct {
	mu      sync.Mutex
	objs    sockLbObjects
	term    *link.Iter // nil when the kernel cannot destroy sockets from BPF
	termErr error
	links   map[string][]link.Link // by cleaned cgroup path
	svcs    map[ServiceKey]*svcState
	revs    revAlloc
	pinPath string // "" = nothing pinned
	closed  bool
}

type svcState struct {
	rev      uint32
	backends []Backend // sorted set
	affSec   uint32
}

// termObjects is loaded apart from the socket hooks because it needs newer
// kernel features (BPF iterators, bpf_sock_destroy); without it the hooks work.
type termObjects struct {
	SkiffUdpTerm *ebpf.Program `ebpf:"skiff_udp_term"`
}

// Load loads the programs and maps into the kernel. Nothing is attached yet.
func Load(opts Options) (*Dataplane, error) {
	opts = opts.withDefaults()
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("lb: memlock: %w", err)
	}
	spec, err := loadSockLb()
	if err != nil {
		return nil, fmt.Errorf("lb: spec: %w", err)
	}
	spec.Maps["services"].MaxEntries = opts.MaxServices
	spec.Maps["backends"].MaxEntries = opts.MaxBackends
	spec.Maps["members"].MaxEntries = opts.MaxBackends
	spec.Maps["affinity"].MaxEntries = opts.AffinityEntries
	spec.Maps["udp_fwd"].MaxEntries = opts.SocketEntries
	spec.Maps["udp_rev"].MaxEntries = opts.SocketEntries

	var collOpts *ebpf.CollectionOptions
	if opts.PinPath != "" {
		if collOpts, err = pinSpec(spec, opts.PinPath); err != nil {
			return nil, err
		}
	}

	d := &Dataplane{links: map[string][]link.Link{}, svcs: map[ServiceKey]*svcState{}, pinPath: opts.PinPath}
	var so struct {
		sockLbMaps
		SkiffConnect4     *ebpf.Program `ebpf:"skiff_connect4"`
		SkiffConnect6     *ebpf.Program `ebpf:"skiff_connect6"`
		SkiffGetpeername4 *ebpf.Program `ebpf:"skiff_getpeername4"`
		SkiffGetpeername6 *ebpf.Program `ebpf:"skiff_getpeername6"`
		SkiffRecvmsg4     *ebpf.Program `ebpf:"skiff_recvmsg4"`
		SkiffRecvmsg6     *ebpf.Program `ebpf:"skiff_recvmsg6"`
		SkiffSendmsg4     *ebpf.Program `ebpf:"skiff_sendmsg4"`
		SkiffSendmsg6     *ebpf.Program `ebpf:"skiff_sendmsg6"`
	}
	if err := spec.LoadAndAssign(&so, collOpts); err != nil {
		return nil, fmt.Errorf("lb: load: %w", err)
	}
	d.objs.sockLbMaps = so.sockLbMaps
	d.objs.sockLbPrograms = sockLbPrograms{
		SkiffConnect4: so.SkiffConnect4, SkiffConnect6: so.SkiffConnect6,
		SkiffGetpeername4: so.SkiffGetpeername4, SkiffGetpeername6: so.SkiffGetpeername6,
		SkiffRecvmsg4: so.SkiffRecvmsg4, SkiffRecvmsg6: so.SkiffRecvmsg6,
		SkiffSendmsg4: so.SkiffSendmsg4, SkiffSendmsg6: so.SkiffSendmsg6,
	}

	var to termObjects
	err = spec.LoadAndAssign(&to, &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		"udp_rev": d.objs.UdpRev, "members": d.objs.Members,
	}})
	if err == nil {
		d.objs.SkiffUdpTerm = to.SkiffUdpTerm
		d.term, err = link.AttachIter(link.IterOptions{Program: to.SkiffUdpTerm})
	}
	if err != nil {
		d.termErr = fmt.Errorf("lb: UDP socket termination unavailable: %w", err)
	}
	if opts.PinPath != "" {
		// Maps that were already pinned carry Services programmed by an
		// earlier Load: adopt them so Upsert diffs against the kernel.
		if err := d.recover(); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// hooks lists every program with the cgroup hook it serves.
func (d *Dataplane) hooks() []hook {
	p := &d.objs.sockLbPrograms
	return []hook{
		{"connect4", p.SkiffConnect4, ebpf.AttachCGroupInet4Connect},
		{"sendmsg4", p.SkiffSendmsg4, ebpf.AttachCGroupUDP4Sendmsg},
		{"recvmsg4", p.SkiffRecvmsg4, ebpf.AttachCGroupUDP4Recvmsg},
		{"getpeername4", p.SkiffGetpeername4, ebpf.AttachCgroupInet4GetPeername},
		{"connect6", p.SkiffConnect6, ebpf.AttachCGroupInet6Connect},
		{"sendmsg6", p.SkiffSendmsg6, ebpf.AttachCGroupUDP6Sendmsg},
		{"recvmsg6", p.SkiffRecvmsg6, ebpf.AttachCGroupUDP6Recvmsg},
		{"getpeername6", p.SkiffGetpeername6, ebpf.AttachCgroupInet6GetPeername},
	}
}

type hook struct {
	name string // pin file name
	prog *ebpf.Program
	at   ebpf.AttachType
}

// Attach attaches all hooks to a cgroup v2 directory; sockets of every
// process below it are load balanced. It may be called for several cgroups.
// With Options.PinPath, links pinned there by an earlier Load are adopted and
// switched to this Load's programs in place, so the hooks never go missing.
func (d *Dataplane) Attach(cgroupPath string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errClosed
	}
	path := filepath.Clean(cgroupPath)
	if _, ok := d.links[path]; ok {
		return fmt.Errorf("lb: %s is already attached", path)
	}
	var ls []link.Link
	for _, h := range d.hooks() {
		l, err := d.attachOne(path, h)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return fmt.Errorf("lb: attach %v to %s: %w", h.at, path, err)
		}
		ls = append(ls, l)
	}
	d.links[path] = ls
	return nil
}

// ProgramIDs returns the kernel IDs of the loaded programs (for diagnostics
// and for checking that Close released them).
func (d *Dataplane) ProgramIDs() ([]ebpf.ProgramID, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	progs := []*ebpf.Program{d.objs.SkiffUdpTerm}
	for _, h := range d.hooks() {
		progs = append(progs, h.prog)
	}
	var ids []ebpf.ProgramID
	for _, p := range progs {
		if p == nil {
			continue
		}
		info, err := p.Info()
		if err != nil {
			return nil, err
		}
		id, _ := info.ID()
		ids = append(ids, id)
	}
	return ids, nil
}

// Close detaches every hook and frees programs and maps. With
// Options.PinPath the pinned hooks and maps stay in the kernel and keep
// serving (the next Load adopts them); Remove deletes them.
func (d *Dataplane) Close() error { return d.release(false) }

// Remove detaches every hook, deletes the pinned maps and links, and
// closes the Dataplane: what a node leaving the cluster wants. Without
// Options.PinPath it is Close.
func (d *Dataplane) Remove() error { return d.release(true) }

func (d *Dataplane) release(remove bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	h := Held{Links: d.links, PinDir: d.pinPath, Closers: []io.Closer{&d.objs}}
	h.Pinned = []*ebpf.Map{d.objs.Services, d.objs.Backends, d.objs.Members, d.objs.Affinity, d.objs.UdpFwd, d.objs.UdpRev}
	if d.term != nil {
		h.Closers = []io.Closer{d.term, &d.objs}
	}
	return Release(h, remove)
}

// CloseLinks closes every link (a pinned one stays attached).
func CloseLinks(ls []link.Link) error {
	var errs []error
	for _, l := range ls {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

var errClosed = errors.New("lb: dataplane is closed")
