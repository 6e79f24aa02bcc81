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
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/bpf/lb"
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
	// PinPath is a directory on a bpffs: the maps and tc links are pinned there and a later
	// Load adopts them, so a restarted proxy leaves no gap in outside traffic.
	PinPath string
}

// Dataplane owns the programs, maps and links. Its methods are safe for concurrent use.
type Dataplane struct {
	mu      sync.Mutex
	objs    npObjects
	links   map[string][]link.Link // by interface name
	pinPath string
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
	d := &Dataplane{links: map[string][]link.Link{}, pinPath: o.PinPath}
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

// Attach puts the ingress and egress programs on an interface with tcx links (kernel 6.6),
// which sit beside any other tc program there (NetworkPolicy's on pod interfaces, a CNI's)
// instead of replacing it. With a PinPath, links pinned by an earlier Load are switched to
// this Load's programs in place.
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
	var ls []link.Link
	for _, h := range []struct {
		name string
		prog *ebpf.Program
		at   ebpf.AttachType
	}{{"ingress", d.objs.SkiffNpIngress, ebpf.AttachTCXIngress}, {"egress", d.objs.SkiffNpEgress, ebpf.AttachTCXEgress}} {
		l, err := d.attachOne(iface, ifname+"-"+h.name, h.prog, h.at)
		if err != nil {
			_ = lb.CloseLinks(ls)
			return fmt.Errorf("nodeport: attach %s %s: %w", ifname, h.name, err)
		}
		ls = append(ls, l)
	}
	d.links[ifname] = ls
	return nil
}

func (d *Dataplane) attachOne(ifindex int, name string, prog *ebpf.Program, at ebpf.AttachType) (link.Link, error) {
	opts := link.TCXOptions{Interface: ifindex, Program: prog, Attach: at}
	if d.pinPath == "" {
		return link.AttachTCX(opts)
	}
	pin := filepath.Join(d.pinPath, "links", name)
	if l, err := link.LoadPinnedLink(pin, nil); err == nil {
		if info, err := l.Info(); err == nil && info.TCX() != nil && int(info.TCX().Ifindex) == ifindex {
			if err := l.Update(prog); err != nil {
				l.Close()
				return nil, fmt.Errorf("update pinned link: %w", err)
			}
			return l, nil
		}
		// The interface was made again: its old link is gone with it.
		_ = l.Unpin()
		l.Close()
	}
	if err := os.MkdirAll(filepath.Dir(pin), 0o700); err != nil {
		return nil, err
	}
	l, err := link.AttachTCX(opts)
	if err != nil {
		return nil, err
	}
	if err := l.Pin(pin); err != nil {
		l.Close()
		return nil, fmt.Errorf("pin link: %w", err)
	}
	return l, nil
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
	o := &d.objs
	return lb.Release(lb.Held{
		Links:   d.links,
		Pinned:  []*ebpf.Map{o.NpServices, o.NpBackends, o.NpMembers, o.NpCt, o.NpRev},
		PinDir:  d.pinPath,
		Closers: []io.Closer{o},
	}, remove)
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
