// Package nodeport programs the tc eBPF programs (bpf/nodeport.c) that translate NodePort,
// LoadBalancer and hostPort traffic reaching a node from outside: the entries (node address,
// port, protocol) -> backends, and the attachment to the node's external interfaces.
package nodeport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/bpf/lb"
	"github.com/skiff-sh/skiff/bpf/tcattach"
)

// Key is one address, port and protocol that outside traffic arrives at.
type Key struct {
	Addr  netip.Addr // IPv4
	Port  uint16
	Proto lb.Proto
}

func (k Key) String() string {
	return fmt.Sprintf("%s/%s", netip.AddrPortFrom(k.Addr, k.Port), k.Proto)
}

// Backend is one endpoint; Local ones (on this node) get DNAT only and see the client's
// address, others are reached with SNAT to the node's address.
type Backend struct {
	Addr  netip.Addr
	Port  uint16
	Local bool
}

// Entry is one Key as the kernel map holds it.
type Entry struct {
	Key      Key
	Backends []Backend
}

// Options configure Load.
type Options struct {
	// PinPath is a directory on a bpffs: the maps and tcx links are pinned there (legacy tc
	// filters stay on their interfaces) and a later Load adopts them, so a restarted proxy
	// leaves no gap in outside traffic.
	PinPath string
	mode    tcattach.Mode // tests: the attach mode instead of the probed one
}

// Dataplane owns the programs, maps and links. Its methods are safe for concurrent use.
type Dataplane struct {
	mu      sync.Mutex
	objs    npObjects
	links   map[string][]*tcattach.Attachment // by interface name
	pinPath string
	mode    tcattach.Mode
	closed  bool
}

var pinnedMaps = []string{"np_services", "np_backends", "np_members", "np_ct", "np_rev"}

// Load loads the programs and maps; nothing is attached yet.
func Load(o Options) (*Dataplane, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("nodeport: memlock: %w", err)
	}
	spec, err := loadNp()
	if err != nil {
		return nil, fmt.Errorf("nodeport: spec: %w", err)
	}
	var opts *ebpf.CollectionOptions
	if o.PinPath != "" {
		if err := os.MkdirAll(o.PinPath, 0o700); err != nil {
			return nil, fmt.Errorf("nodeport: pin path: %w", err)
		}
		var fs unix.Statfs_t
		if err := unix.Statfs(o.PinPath, &fs); err != nil || fs.Type != unix.BPF_FS_MAGIC {
			return nil, fmt.Errorf("nodeport: pin path %s is not on a bpffs", o.PinPath)
		}
		for _, name := range pinnedMaps {
			spec.Maps[name].Pinning = ebpf.PinByName
		}
		opts = &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: o.PinPath}}
	}
	if o.mode == "" {
		if o.mode, err = tcattach.Detect(); err != nil {
			return nil, fmt.Errorf("nodeport: %w", err)
		}
	}
	d := &Dataplane{links: map[string][]*tcattach.Attachment{}, pinPath: o.PinPath, mode: o.mode}
	if err := spec.LoadAndAssign(&d.objs, opts); err != nil {
		return nil, fmt.Errorf("nodeport: load: %w", err)
	}
	if o.PinPath != "" {
		// Adopted maps may hold what a crash in the middle of a Set left.
		if err := d.sweep(); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// Attach puts the ingress and egress programs on an interface: tcx links (kernel 6.6), which
// sit beside any other tc program there (a CNI's) instead of replacing it, or else legacy tc
// filters at their own priority. With a PinPath, what an earlier Load attached there is
// switched to this Load's programs in place.
func (d *Dataplane) Attach(ifname string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errClosed
	}
	if _, ok := d.links[ifname]; ok {
		return nil
	}
	iface, err := netInterface(ifname)
	if err != nil {
		return err
	}
	var as []*tcattach.Attachment
	for _, h := range []struct {
		name   string
		prog   *ebpf.Program
		egress bool
	}{{"ingress", d.objs.SkiffNpIngress, false}, {"egress", d.objs.SkiffNpEgress, true}} {
		hook := tcattach.Hook{Ifindex: iface, Egress: h.egress, Name: FilterPrefix + "-" + h.name, Priority: filterPriority}
		if d.pinPath != "" {
			hook.Pin = filepath.Join(d.pinPath, "links", ifname+"-"+h.name)
			err = os.MkdirAll(filepath.Dir(hook.Pin), 0o700)
		}
		var a *tcattach.Attachment
		if err == nil {
			a, err = tcattach.Attach(d.mode, hook, h.prog)
		}
		if err != nil {
			_ = closeAll(as)
			return fmt.Errorf("nodeport: attach %s %s: %w", ifname, h.name, err)
		}
		as = append(as, a)
	}
	d.links[ifname] = as
	return nil
}

// FilterPrefix begins the names of the legacy tc filters.
const FilterPrefix = "skiff-nodeport"

// filterPriority runs the filters first on an interface (NetworkPolicy's are on pod veths).
const filterPriority = 1

// Mode is how Attach attaches the programs.
func (d *Dataplane) Mode() tcattach.Mode { return d.mode }

func closeAll(as []*tcattach.Attachment) error {
	var errs []error
	for _, a := range as {
		errs = append(errs, a.Close())
	}
	return errors.Join(errs...)
}

func netInterface(name string) (int, error) {
	iface, err := net.InterfaceByName(name)
	if err != nil {
		return 0, fmt.Errorf("nodeport: interface %s: %w", name, err)
	}
	return iface.Index, nil
}

// Close releases the programs and maps. Pinned links and maps stay and keep translating
// until the next Load adopts them; Remove deletes them.
func (d *Dataplane) Close() error { return d.release(false) }

// Remove detaches the programs and deletes everything pinned, then closes.
func (d *Dataplane) Remove() error { return d.release(true) }

func (d *Dataplane) release(remove bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	for _, as := range d.links {
		for _, a := range as {
			if remove {
				errs = append(errs, a.Detach())
			} else {
				errs = append(errs, a.Close())
			}
		}
	}
	if remove && d.pinPath != "" {
		// What a previous Load attached to interfaces this one never did.
		errs = append(errs, tcattach.DetachAll(filepath.Join(d.pinPath, "links"), FilterPrefix))
	}
	o := &d.objs
	return errors.Join(append(errs, lb.Release(lb.Held{
		Pinned:  []*ebpf.Map{o.NpServices, o.NpBackends, o.NpMembers, o.NpCt, o.NpRev},
		PinDir:  d.pinPath,
		Closers: []io.Closer{o},
	}, remove))...)
}

var errClosed = errors.New("nodeport: dataplane is closed")

func (k Key) raw() (npNpKey, error) {
	if !k.Addr.Unmap().Is4() || k.Port == 0 || (k.Proto != lb.TCP && k.Proto != lb.UDP) {
		return npNpKey{}, fmt.Errorf("nodeport: key %v must be an IPv4 address, a port and TCP or UDP", k)
	}
	return npNpKey{Addr: addr4(k.Addr), Port: lb.PortToNet(k.Port), Proto: uint8(k.Proto)}, nil
}

// addr4 holds a's bytes in memory in network order, as the C side reads them.
func addr4(a netip.Addr) uint32 {
	b := a.Unmap().As4()
	return binary.NativeEndian.Uint32(b[:])
}

func addrFrom4(w uint32) netip.Addr {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], w)
	return netip.AddrFrom4(b)
}

func compareKeys(a, b Key) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	return int(a.Proto) - int(b.Proto)
}

func compareBackends(a, b Backend) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	return int(a.Port) - int(b.Port)
}
