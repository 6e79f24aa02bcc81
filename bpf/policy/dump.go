package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sort"

	"github.com/cilium/ebpf"
)

// State is the maps' content.
type State struct {
	Endpoints map[netip.Addr]Endpoint
	Rules     map[RuleKey][]PortRange
	HostAddrs []netip.Addr
	Tracked   int // live and stale conntrack entries
	Stats     Stats
}

// Stats are the programs' counters, summed over CPUs.
type Stats struct {
	Allowed    uint64 // new flows a policy allowed
	Denied     uint64 // packets dropped: no policy allowed them
	Tracked    uint64 // packets of tracked flows and their replies
	Unisolated uint64 // new flows of a direction no policy isolates
}

// Dump reads every map (not the conntrack entries themselves: only their number).
func (d *Dataplane) Dump() (State, error) { return d.maps().dump() }

// Stats sums the per-CPU counters.
func (d *Dataplane) Stats() (Stats, error) { return d.maps().stats() }

type maps struct{ endpoints, rules, hostAddrs, conntrack, counters *ebpf.Map }

func (d *Dataplane) maps() maps {
	o := &d.objs.netpolMaps
	return maps{o.Endpoints, o.Rules, o.HostAddrs, o.Conntrack, o.Stats}
}

// ReadPinned reads the maps a node's policy actor pinned in dir, without loading programs
// (skiff policy dump).
func ReadPinned(dir string) (State, error) {
	var m maps
	var errs []error
	for _, p := range []struct {
		name string
		dst  **ebpf.Map
	}{{netpolMapEndpoints, &m.endpoints}, {netpolMapRules, &m.rules}, {netpolMapHostAddrs, &m.hostAddrs},
		{netpolMapConntrack, &m.conntrack}, {netpolMapStats, &m.counters}} {
		mp, err := ebpf.LoadPinnedMap(filepath.Join(dir, p.name), &ebpf.LoadPinOptions{ReadOnly: true})
		if err != nil {
			errs = append(errs, fmt.Errorf("map %s: %w", p.name, err))
			continue
		}
		defer mp.Close()
		*p.dst = mp
	}
	if err := errors.Join(errs...); err != nil {
		return State{}, err
	}
	return m.dump()
}

func (d maps) dump() (State, error) {
	s := State{Endpoints: map[netip.Addr]Endpoint{}, Rules: map[RuleKey][]PortRange{}}
	var ek uint32
	var ev netpolEndpoint
	it := d.endpoints.Iterate()
	for it.Next(&ek, &ev) {
		s.Endpoints[addrOf(ek)] = Endpoint{Ingress: ev.Flags&(1<<Ingress) != 0, Egress: ev.Flags&(1<<Egress) != 0}
	}
	if err := it.Err(); err != nil {
		return s, err
	}
	var rk netpolRuleKey
	var rv netpolRuleVal
	it = d.rules.Iterate()
	for it.Next(&rk, &rv) {
		s.Rules[fromRuleKey(rk)] = fromRuleVal(rv)
	}
	if err := it.Err(); err != nil {
		return s, err
	}
	var hv uint8
	it = d.hostAddrs.Iterate()
	for it.Next(&ek, &hv) {
		s.HostAddrs = append(s.HostAddrs, addrOf(ek))
	}
	if err := it.Err(); err != nil {
		return s, err
	}
	sort.Slice(s.HostAddrs, func(i, j int) bool { return s.HostAddrs[i].Less(s.HostAddrs[j]) })
	var ck netpolCtKey
	var cv netpolCtVal
	it = d.conntrack.Iterate()
	for it.Next(&ck, &cv) {
		s.Tracked++
	}
	if err := it.Err(); err != nil {
		return s, err
	}
	s.Stats, _ = d.stats()
	return s, nil
}

func (d maps) stats() (Stats, error) {
	var out Stats
	fields := []*uint64{&out.Allowed, &out.Denied, &out.Tracked, &out.Unisolated}
	for i, f := range fields {
		var per []uint64
		if err := d.counters.Lookup(uint32(i), &per); err != nil {
			return out, err
		}
		for _, v := range per {
			*f += v
		}
	}
	return out, nil
}
