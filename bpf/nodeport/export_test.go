package nodeport

import (
	"github.com/cilium/ebpf"

	"github.com/skiff-sh/skiff/bpf/tcattach"
)

// Programs exposes the ingress and egress programs to the tests (BPF_PROG_TEST_RUN).
func Programs(d *Dataplane) (ingress, egress *ebpf.Program) {
	return d.objs.SkiffNpIngress, d.objs.SkiffNpEgress
}

// SlotsAndMembers counts the entries of the slot and member maps, so tests see what a change
// leaves behind.
func SlotsAndMembers(d *Dataplane) (slots, members int, err error) {
	if slots, err = count(d.objs.NpBackends); err != nil {
		return 0, 0, err
	}
	members, err = count(d.objs.NpMembers)
	return slots, members, err
}

func count(m *ebpf.Map) (int, error) {
	var n int
	var k, v []byte
	it := m.Iterate()
	for it.Next(&k, &v) {
		n++
	}
	return n, it.Err()
}

// LeaveHalfDone writes what a Set stopped between its slot writes and its flip leaves: a slot
// in k's unused bank and a member of no set.
func LeaveHalfDone(d *Dataplane, k Key, b Backend) error {
	raw, err := k.raw()
	if err != nil {
		return err
	}
	var cur npNpSvc
	if err := d.objs.NpServices.Lookup(&raw, &cur); err != nil {
		return err
	}
	sk := npNpSlotKey{Svc: raw, Bank: cur.Bank ^ 1, Idx: cur.Count + 5}
	if err := d.objs.NpBackends.Put(&sk, b.raw()); err != nil {
		return err
	}
	mk := memberKey(raw, b.raw())
	return d.objs.NpMembers.Put(&mk, uint8(1))
}

// LoadMode is Load with the attach mode given instead of probed.
func LoadMode(o Options, m tcattach.Mode) (*Dataplane, error) {
	o.mode = m
	return Load(o)
}
