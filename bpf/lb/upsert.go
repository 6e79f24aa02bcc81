package lb

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
)

// Upsert programs one Service port. A changed backend set is written into a
// fresh slot generation, the Service entry is flipped to it with one map
// update, and only then are the old slots freed, so a concurrent connect()
// sees either the old or the new set. An unchanged spec writes nothing.
// When UDP backends were removed, connected UDP sockets still pinned to them
// in the caller's network namespace are aborted (see TerminateStaleUDP).
func (d *Dataplane) Upsert(k ServiceKey, s ServiceSpec) (Stats, error) {
	k.VIP = k.VIP.Unmap()
	bes, aff, err := normalize(k, s)
	if err != nil {
		return Stats{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return Stats{}, errClosed
	}
	var st Stats
	old := d.svcs[k]
	var oldBes []Backend
	if old != nil {
		oldBes = old.backends
	}
	sameSet := old != nil && slices.Equal(oldBes, bes)
	if sameSet && old.affSec == aff {
		return st, nil
	}
	raw := k.raw()
	added, removed := diff(oldBes, bes)

	var undo []func()
	rollback := func(err error) (Stats, error) {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		return Stats{}, fmt.Errorf("lb: upsert %v: %w", k, err)
	}

	rev := uint32(0)
	if sameSet {
		rev = old.rev // only the affinity changed: the slots stay
	} else {
		rev = d.revs.get()
		undo = append(undo, func() { d.revs.put(rev) })
		for i, b := range bes {
			sk := sockLbSlotKey{Rev: rev, Idx: uint32(i)}
			if err := d.objs.Backends.Update(&sk, b.raw(), ebpf.UpdateAny); err != nil {
				return rollback(err)
			}
			st.BackendWrites++
			undo = append(undo, func() { _ = d.objs.Backends.Delete(&sk) })
		}
	}
	for _, b := range added {
		mk := sockLbMemberKey{Svc: raw, Be: b.raw()}
		if err := d.objs.Members.Update(&mk, uint8(1), ebpf.UpdateAny); err != nil {
			return rollback(err)
		}
		st.BackendWrites++
		undo = append(undo, func() { _ = d.objs.Members.Delete(&mk) })
	}
	val := sockLbSvcVal{Count: uint32(len(bes)), Rev: rev, AffinitySec: aff}
	if err := d.objs.Services.Update(&raw, &val, ebpf.UpdateAny); err != nil {
		return rollback(err)
	}
	st.ServiceWrites++

	// The flip is done: from here on failures leak entries but never
	// serve a wrong backend, so report them without rolling back.
	var errs []error
	if old != nil && !sameSet {
		errs = append(errs, d.freeSlots(old, &st))
	}
	errs = append(errs, d.dropMembers(raw, removed, &st))
	d.svcs[k] = &svcState{rev: rev, backends: bes, affSec: aff}
	if k.Proto == UDP && len(removed) > 0 && d.term != nil {
		errs = append(errs, d.terminate(""))
	}
	if err := errors.Join(errs...); err != nil {
		return st, fmt.Errorf("lb: upsert %v: %w", k, err)
	}
	return st, nil
}

// Delete removes a Service port; deleting an unknown one is not an error.
func (d *Dataplane) Delete(k ServiceKey) error {
	k.VIP = k.VIP.Unmap()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errClosed
	}
	old := d.svcs[k]
	if old == nil {
		return nil
	}
	raw := k.raw()
	if err := d.objs.Services.Delete(&raw); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("lb: delete %v: %w", k, err)
	}
	delete(d.svcs, k)
	var st Stats
	errs := []error{d.freeSlots(old, &st), d.dropMembers(raw, old.backends, &st)}
	if k.Proto == UDP && d.term != nil {
		errs = append(errs, d.terminate(""))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lb: delete %v: %w", k, err)
	}
	return nil
}

func (d *Dataplane) freeSlots(old *svcState, st *Stats) error {
	var errs []error
	for i := range old.backends {
		sk := sockLbSlotKey{Rev: old.rev, Idx: uint32(i)}
		if err := d.objs.Backends.Delete(&sk); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
			continue
		}
		st.BackendDeletes++
	}
	d.revs.put(old.rev)
	return errors.Join(errs...)
}

func (d *Dataplane) dropMembers(raw sockLbSvcKey, bes []Backend, st *Stats) error {
	var errs []error
	for _, b := range bes {
		mk := sockLbMemberKey{Svc: raw, Be: b.raw()}
		if err := d.objs.Members.Delete(&mk); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
			continue
		}
		st.BackendDeletes++
	}
	return errors.Join(errs...)
}

// diff returns the members of set b missing from a, and of a missing from b.
func diff(a, b []Backend) (added, removed []Backend) {
	inA := make(map[Backend]bool, len(a))
	for _, x := range a {
		inA[x] = true
	}
	inB := make(map[Backend]bool, len(b))
	for _, x := range b {
		inB[x] = true
		if !inA[x] {
			added = append(added, x)
		}
	}
	for _, x := range a {
		if !inB[x] {
			removed = append(removed, x)
		}
	}
	return added, removed
}
