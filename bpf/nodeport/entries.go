package nodeport

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/skiff-sh/skiff/bpf/lb"
)

// Set makes k's backends bs. They are written into the bank of slots k does not use and k is
// flipped to it with one map write, so a packet sees the old set or the new one; the old
// bank is freed after. A set the slot map has no room for is an error and k keeps its old set.
func (d *Dataplane) Set(k Key, bs []Backend) error {
	raw, err := k.raw()
	if err != nil {
		return err
	}
	bs = slices.Clone(bs)
	slices.SortFunc(bs, compareBackends)
	for _, b := range bs {
		if !b.Addr.Unmap().Is4() || b.Port == 0 {
			return fmt.Errorf("nodeport: %v: backend %v must be IPv4 with a port", k, netip.AddrPortFrom(b.Addr, b.Port))
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errClosed
	}
	var cur npNpSvc
	var old []npNpBackend
	exists := false
	switch err := d.objs.NpServices.Lookup(&raw, &cur); {
	case err == nil:
		exists = true
		if old, err = readSlots(d.objs.NpBackends, raw, cur); err != nil {
			return fmt.Errorf("nodeport: set %v: %w", k, err)
		}
	case !errors.Is(err, ebpf.ErrKeyNotExist):
		return fmt.Errorf("nodeport: set %v: %w", k, err)
	}
	next := npNpSvc{Count: uint32(len(bs))}
	if exists {
		next.Bank = cur.Bank ^ 1
	}
	fresh := make([]npNpBackend, len(bs))
	for i, b := range bs {
		fresh[i] = b.raw()
	}
	added, removed := diffMembers(old, fresh)
	var undo []func()
	rollback := func(err error) error {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		return fmt.Errorf("nodeport: set %v (%d backends): %w", k, len(bs), err)
	}
	for i := range fresh {
		sk := npNpSlotKey{Svc: raw, Bank: next.Bank, Idx: uint32(i)}
		if err := d.objs.NpBackends.Update(&sk, &fresh[i], ebpf.UpdateAny); err != nil {
			return rollback(err)
		}
		undo = append(undo, func() { _ = d.objs.NpBackends.Delete(&sk) })
	}
	for _, b := range added {
		mk := memberKey(raw, b)
		if err := d.objs.NpMembers.Update(&mk, uint8(1), ebpf.UpdateAny); err != nil {
			return rollback(err)
		}
		undo = append(undo, func() { _ = d.objs.NpMembers.Delete(&mk) })
	}
	if err := d.objs.NpServices.Update(&raw, &next, ebpf.UpdateAny); err != nil {
		return rollback(err)
	}
	// Flipped: a failure from here on leaks entries (Load sweeps them) but serves no wrong backend.
	var errs []error
	if exists {
		errs = append(errs, deleteSlots(d.objs.NpBackends, raw, cur))
	}
	errs = append(errs, deleteMembers(d.objs.NpMembers, raw, removed))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nodeport: set %v: %w", k, err)
	}
	return nil
}

// Delete removes k with its slots and members; a missing key is not an error.
func (d *Dataplane) Delete(k Key) error {
	raw, err := k.raw()
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errClosed
	}
	var cur npNpSvc
	if err := d.objs.NpServices.Lookup(&raw, &cur); errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("nodeport: delete %v: %w", k, err)
	}
	old, err := readSlots(d.objs.NpBackends, raw, cur)
	if err != nil {
		return fmt.Errorf("nodeport: delete %v: %w", k, err)
	}
	if err := d.objs.NpServices.Delete(&raw); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("nodeport: delete %v: %w", k, err)
	}
	if err := errors.Join(deleteSlots(d.objs.NpBackends, raw, cur), deleteMembers(d.objs.NpMembers, raw, old)); err != nil {
		return fmt.Errorf("nodeport: delete %v: %w", k, err)
	}
	return nil
}

// sweep deletes slots outside every entry's bank in use and members of no entry's set: what
// a Set or Delete stopped half way leaves in pinned maps.
func (d *Dataplane) sweep() error {
	live := map[npNpKey]npNpSvc{}
	members := map[npNpMemberKey]bool{}
	var k npNpKey
	var v npNpSvc
	it := d.objs.NpServices.Iterate()
	for it.Next(&k, &v) {
		live[k] = v
		bs, err := readSlots(d.objs.NpBackends, k, v)
		if err != nil {
			return fmt.Errorf("nodeport: adopt pinned maps: %w", err)
		}
		for _, b := range bs {
			members[memberKey(k, b)] = true
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("nodeport: adopt pinned maps: %w", err)
	}
	slotLive := func(sk npNpSlotKey, _ npNpBackend) bool {
		v, ok := live[sk.Svc]
		return ok && v.Bank == sk.Bank && sk.Idx < v.Count
	}
	memberLive := func(mk npNpMemberKey, _ uint8) bool { return members[mk] }
	if err := errors.Join(lb.Sweep(d.objs.NpBackends, slotLive), lb.Sweep(d.objs.NpMembers, memberLive)); err != nil {
		return fmt.Errorf("nodeport: adopt pinned maps: %w", err)
	}
	return nil
}

// Dump reads every entry from the kernel maps, sorted by key.
func (d *Dataplane) Dump() ([]Entry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosed
	}
	return dump(d.objs.NpServices, d.objs.NpBackends)
}

// DumpPinned reads the entries a node's proxy pinned under dir, with no proxy running.
func DumpPinned(dir string) ([]Entry, error) {
	ro := &ebpf.LoadPinOptions{ReadOnly: true}
	svcs, err := ebpf.LoadPinnedMap(filepath.Join(dir, "np_services"), ro)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("nodeport: %w", err)
	}
	defer svcs.Close()
	slots, err := ebpf.LoadPinnedMap(filepath.Join(dir, "np_backends"), ro)
	if err != nil {
		return nil, fmt.Errorf("nodeport: %w", err)
	}
	defer slots.Close()
	return dump(svcs, slots)
}

func dump(svcs, slots *ebpf.Map) ([]Entry, error) {
	var out []Entry
	var k npNpKey
	var v npNpSvc
	it := svcs.Iterate()
	for it.Next(&k, &v) {
		e := Entry{Key: Key{Addr: addrFrom4(k.Addr), Port: lb.PortFromNet(k.Port), Proto: lb.Proto(k.Proto)}}
		bs, err := readSlots(slots, k, v)
		if err != nil {
			return nil, fmt.Errorf("nodeport: dump %v: %w", e.Key, err)
		}
		for _, b := range bs {
			e.Backends = append(e.Backends, Backend{Addr: addrFrom4(b.Addr), Port: lb.PortFromNet(b.Port), Local: b.Flags&flagLocal != 0})
		}
		out = append(out, e)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("nodeport: dump: %w", err)
	}
	slices.SortFunc(out, func(a, b Entry) int { return compareKeys(a.Key, b.Key) })
	return out, nil
}

// flagLocal is NP_LOCAL: the backend runs on this node.
const flagLocal = 1

func (b Backend) raw() npNpBackend {
	r := npNpBackend{Addr: addr4(b.Addr), Port: lb.PortToNet(b.Port)}
	if b.Local {
		r.Flags = flagLocal
	}
	return r
}

// readSlots reads the backends of v's bank in use.
func readSlots(slots *ebpf.Map, k npNpKey, v npNpSvc) ([]npNpBackend, error) {
	out := make([]npNpBackend, v.Count)
	for i := range out {
		sk := npNpSlotKey{Svc: k, Bank: v.Bank, Idx: uint32(i)}
		if err := slots.Lookup(&sk, &out[i]); err != nil {
			return nil, fmt.Errorf("slot %d: %w", i, err)
		}
	}
	return out, nil
}

func deleteSlots(slots *ebpf.Map, k npNpKey, v npNpSvc) error {
	var errs []error
	for i := range v.Count {
		sk := npNpSlotKey{Svc: k, Bank: v.Bank, Idx: i}
		errs = append(errs, ignoreMissing(slots.Delete(&sk)))
	}
	return errors.Join(errs...)
}

func deleteMembers(members *ebpf.Map, k npNpKey, bs []npNpBackend) error {
	var errs []error
	for _, b := range bs {
		mk := memberKey(k, b)
		errs = append(errs, ignoreMissing(members.Delete(&mk)))
	}
	return errors.Join(errs...)
}

func memberKey(k npNpKey, b npNpBackend) npNpMemberKey {
	return npNpMemberKey{Svc: k, Addr: b.Addr, Port: b.Port}
}

// diffMembers returns the addresses of b missing from a, and of a missing from b; the
// Local flag is not part of membership.
func diffMembers(a, b []npNpBackend) (added, removed []npNpBackend) {
	type addrPort struct {
		addr uint32
		port uint16
	}
	in := func(bs []npNpBackend) map[addrPort]bool {
		m := make(map[addrPort]bool, len(bs))
		for _, x := range bs {
			m[addrPort{x.Addr, x.Port}] = true
		}
		return m
	}
	inA, inB := in(a), in(b)
	for _, x := range b {
		if !inA[addrPort{x.Addr, x.Port}] {
			added = append(added, x)
		}
	}
	for _, x := range a {
		if !inB[addrPort{x.Addr, x.Port}] {
			removed = append(removed, x)
		}
	}
	return added, removed
}

func ignoreMissing(err error) error {
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	return err
}
