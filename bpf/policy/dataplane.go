package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/bpf/tcattach"
)

// Dataplane is the loaded programs with their maps (pinned under PinDir, so a restarted
// agent adopts them and neither policy nor tracked connections change).
type Dataplane struct {
	objs   netpolObjects
	pinDir string
	mode   tcattach.Mode
	ids    [2]ebpf.ProgramID // of progs(), for Attach's check
	// mu makes Attach, Forget and Close one at a time (the veth watcher's, sandboxes', the
	// actor's stop), so no attach uses programs being closed.
	mu     sync.Mutex
	closed bool
}

// ErrClosed is Attach or Forget on a closed Dataplane (its incarnation stopped).
var ErrClosed = errors.New("policy: the dataplane is closed")

// Load loads the programs and creates or adopts the maps pinned in pinDir, a bpffs directory.
// The programs are attached with tcx where the kernel has it, else with legacy tc.
func Load(pinDir string) (*Dataplane, error) {
	mode, err := tcattach.Detect()
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return LoadMode(pinDir, mode)
}

// LoadMode is Load with the attach mode given instead of probed (tests of both modes).
func LoadMode(pinDir string, mode tcattach.Mode) (*Dataplane, error) {
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
	d := &Dataplane{pinDir: pinDir, mode: mode}
	if err := spec.LoadAndAssign(&d.objs, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: pinDir}}); err != nil {
		return nil, fmt.Errorf("policy: load: %w", err)
	}
	for i, prog := range d.progs() {
		if d.ids[i], err = tcattach.ProgramID(prog); err != nil {
			d.objs.Close()
			return nil, fmt.Errorf("policy: %w", err)
		}
	}
	return d, nil
}

// Mode is how Attach attaches the programs.
func (d *Dataplane) Mode() tcattach.Mode { return d.mode }

// Close releases this process's handles; pinned maps, links and tc filters keep enforcing.
func (d *Dataplane) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closeLocked()
}

func (d *Dataplane) closeLocked() error {
	if d.closed {
		return nil
	}
	d.closed = true
	return d.objs.Close()
}

// Remove detaches every pinned link and tc filter and unpins the maps (the node is torn down).
func (d *Dataplane) Remove() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closeLocked()
	return errors.Join(tcattach.DetachAll(filepath.Join(d.pinDir, "links"), FilterPrefix), os.RemoveAll(d.pinDir))
}

// FilterPrefix begins the names of the legacy tc filters, so they can be found on any veth.
const FilterPrefix = "skiff-netpol"

// filterPriority places the filters on a veth; NodePort's are on other interfaces.
const filterPriority = 2

// progs are the programs for hooks(), in the same order.
func (d *Dataplane) progs() [2]*ebpf.Program { return [2]*ebpf.Program{d.objs.FromPod, d.objs.ToPod} }

// hooks are the two attachments on a pod's host-side veth: its tc ingress is what the pod
// sends (its egress), its tc egress what it receives.
func (d *Dataplane) hooks(ifindex int) [2]tcattach.Hook {
	pin := func(side string) string { return filepath.Join(d.pinDir, "links", strconv.Itoa(ifindex)+"-"+side) }
	return [2]tcattach.Hook{
		{Ifindex: ifindex, Pin: pin("in"), Name: FilterPrefix + "-from-pod", Priority: filterPriority},
		{Ifindex: ifindex, Egress: true, Pin: pin("out"), Name: FilterPrefix + "-to-pod", Priority: filterPriority},
	}
}

// Attach puts both programs on a pod's host-side veth unless they are on it already, and
// reports whether it attached. What an earlier Attach left there (a pinned link, a filter;
// of this process or a previous one) is switched to these programs.
func (d *Dataplane) Attach(ifindex int) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false, ErrClosed
	}
	hs := d.hooks(ifindex)
	held := true
	for i := 0; held && i < len(hs); i++ {
		ok, err := tcattach.Holds(d.mode, hs[i], d.ids[i])
		if err != nil {
			return false, fmt.Errorf("policy: interface %d: %w", ifindex, err)
		}
		held = ok
	}
	if held {
		return false, nil
	}
	for i, prog := range d.progs() {
		a, err := tcattach.Attach(d.mode, hs[i], prog)
		if err != nil {
			return false, fmt.Errorf("policy: %w", err)
		}
		a.Close() // pinned or a filter: it stays
	}
	return true, nil
}

// Attached lists the interfaces with pinned links (legacy filters go with their interface).
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

// Forget unpins the links of an interface that was deleted (the kernel detached them). Links
// still on an interface of that index (a new one, already attached) stay.
func (d *Dataplane) Forget(ifindex int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	var errs []error
	for _, h := range d.hooks(ifindex) {
		errs = append(errs, tcattach.DropStale(h))
	}
	return errors.Join(errs...)
}

// Prune forgets the links of every interface deleted while no agent ran.
func (d *Dataplane) Prune() error {
	idxs, err := d.Attached()
	if err != nil {
		return err
	}
	var errs []error
	for _, idx := range idxs {
		errs = append(errs, d.Forget(idx))
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
