package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Dataplane is the loaded programs with their maps (pinned under PinDir, so a restarted
// agent adopts them and neither policy nor tracked connections change).
type Dataplane struct {
	objs   netpolObjects
	pinDir string
}

// Load loads the programs and creates or adopts the maps pinned in pinDir, a bpffs directory.
func Load(pinDir string) (*Dataplane, error) {
	if err := os.MkdirAll(filepath.Join(pinDir, "links"), 0o700); err != nil {
		return nil, fmt.Errorf("policy: pin path: %w", err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(pinDir, &fs); err != nil || fs.Type != unix.BPF_FS_MAGIC {
		return nil, fmt.Errorf("policy: pin path %s is not on a bpffs (mount -t bpf bpf <dir>)", pinDir)
	}
	spec, err := loadNetpol()
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	for _, m := range spec.Maps {
		m.Pinning = ebpf.PinByName
	}
	d := &Dataplane{pinDir: pinDir}
	if err := spec.LoadAndAssign(&d.objs, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: pinDir}}); err != nil {
		return nil, fmt.Errorf("policy: load: %w", err)
	}
	return d, nil
}

// Close releases this process's handles; pinned maps and links keep enforcing.
func (d *Dataplane) Close() error { return d.objs.Close() }

// Remove detaches every pinned link and unpins the maps (the node is torn down).
func (d *Dataplane) Remove() error {
	d.Close()
	return os.RemoveAll(d.pinDir)
}

func (d *Dataplane) linkPin(ifindex int, at ebpf.AttachType) string {
	side := "in"
	if at == ebpf.AttachTCXEgress {
		side = "out"
	}
	return filepath.Join(d.pinDir, "links", strconv.Itoa(ifindex)+"-"+side)
}

// Attach puts both programs on a pod's host-side veth (tcx ingress: the pod's egress; tcx
// egress: its ingress). A link pinned for the same interface is updated in place.
func (d *Dataplane) Attach(ifindex int) error {
	for _, h := range []struct {
		at   ebpf.AttachType
		prog *ebpf.Program
	}{{ebpf.AttachTCXIngress, d.objs.FromPod}, {ebpf.AttachTCXEgress, d.objs.ToPod}} {
		pin := d.linkPin(ifindex, h.at)
		if l, err := link.LoadPinnedLink(pin, nil); err == nil {
			info, ierr := l.Info()
			if ierr == nil && info.TCX() != nil && int(info.TCX().Ifindex) == ifindex {
				err = l.Update(h.prog)
				l.Close()
				if err != nil {
					return fmt.Errorf("policy: update link on %d: %w", ifindex, err)
				}
				continue
			}
			_ = l.Unpin() // its interface is gone (the index was reused)
			l.Close()
		}
		l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: h.prog, Attach: h.at})
		if err != nil {
			return fmt.Errorf("policy: attach to interface %d: %w", ifindex, err)
		}
		err = l.Pin(pin)
		l.Close()
		if err != nil {
			return fmt.Errorf("policy: pin link: %w", err)
		}
	}
	return nil
}

// Attached lists the interfaces with pinned links.
func (d *Dataplane) Attached() ([]int, error) {
	ents, err := os.ReadDir(filepath.Join(d.pinDir, "links"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if idx, side, ok := strings.Cut(e.Name(), "-"); ok && side == "in" {
			if n, err := strconv.Atoi(idx); err == nil {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// Forget unpins the links of an interface that is gone (its links went with it).
func (d *Dataplane) Forget(ifindex int) error {
	var errs []error
	for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
		if err := os.Remove(d.linkPin(ifindex, at)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SetEndpoint writes a pod's isolation; a pod isolated in no direction is deleted.
func (d *Dataplane) SetEndpoint(pod netip.Addr, e Endpoint) error {
	k := be32(pod)
	if !e.Ingress && !e.Egress {
		return ignoreMissing(d.objs.Endpoints.Delete(k))
	}
	var v netpolEndpoint
	if e.Ingress {
		v.Flags |= 1 << Ingress
	}
	if e.Egress {
		v.Flags |= 1 << Egress
	}
	return d.objs.Endpoints.Put(k, v)
}

// SetRule writes the ports a pod allows toward (or from) a peer prefix.
func (d *Dataplane) SetRule(k RuleKey, ports []PortRange) error {
	key, err := ruleKey(k)
	if err != nil {
		return err
	}
	val, err := ruleVal(ports)
	if err != nil {
		return err
	}
	return d.objs.Rules.Put(key, val)
}

// DeleteRule removes one rule entry.
func (d *Dataplane) DeleteRule(k RuleKey) error {
	key, err := ruleKey(k)
	if err != nil {
		return err
	}
	return ignoreMissing(d.objs.Rules.Delete(key))
}

// SetHostAddrs makes addrs exactly the node's own addresses, whose traffic to pods is allowed.
func (d *Dataplane) SetHostAddrs(addrs []netip.Addr) error {
	want := map[uint32]bool{}
	for _, a := range addrs {
		if a.Is4() {
			want[be32(a)] = true
		}
	}
	var k uint32
	var v uint8
	var stale []uint32
	it := d.objs.HostAddrs.Iterate()
	for it.Next(&k, &v) {
		if !want[k] {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, k := range stale {
		if err := ignoreMissing(d.objs.HostAddrs.Delete(k)); err != nil {
			return err
		}
	}
	for k := range want {
		if err := d.objs.HostAddrs.Put(k, uint8(1)); err != nil {
			return err
		}
	}
	return nil
}

func ignoreMissing(err error) error {
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	return err
}
