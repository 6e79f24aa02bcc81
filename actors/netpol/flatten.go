package netpol

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/skiff-sh/skiff/bpf/policy"
)

// flatten turns grants into longest-prefix-match entries: every prefix a grant or an except
// names gets the union of the ports of the grants that cover it whole and do not except it.
// The longest entry containing an address is then all the kernel needs to read: a grant
// covering the address either covers that entry whole or is itself a longer entry, and so is
// an except.
func flatten(gs []grant) map[netip.Prefix][]policy.PortRange {
	exact := map[netip.Addr][][]policy.PortRange{} // /32 grants without excepts, the common case
	var wide []grant
	entries := map[netip.Prefix]bool{}
	for _, g := range gs {
		entries[g.prefix] = true
		for _, e := range g.except {
			entries[e] = true
		}
		if g.prefix.Bits() == 32 && len(g.except) == 0 {
			exact[g.prefix.Addr()] = append(exact[g.prefix.Addr()], g.ports)
			continue
		}
		wide = append(wide, g)
	}
	out := make(map[netip.Prefix][]policy.PortRange, len(entries))
	for x := range entries {
		var ports []policy.PortRange
		if x.Bits() == 32 {
			for _, p := range exact[x.Addr()] {
				ports = append(ports, p...)
			}
		}
		for _, g := range wide {
			if covers(g.prefix, x) && !slices.ContainsFunc(g.except, func(e netip.Prefix) bool { return covers(e, x) }) {
				ports = append(ports, g.ports...)
			}
		}
		out[x] = normalize(ports)
	}
	return out
}

// covers reports whether p contains all of x.
func covers(p, x netip.Prefix) bool { return p.Bits() <= x.Bits() && p.Contains(x.Addr()) }

// normalize sorts and merges port ranges; "any" absorbs the rest.
func normalize(ports []policy.PortRange) []policy.PortRange {
	if slices.ContainsFunc(ports, func(p policy.PortRange) bool { return p.Proto == policy.ProtoAny }) {
		return allPorts
	}
	slices.SortFunc(ports, func(a, b policy.PortRange) int {
		return cmp.Or(cmp.Compare(a.Proto, b.Proto), cmp.Compare(a.Lo, b.Lo), cmp.Compare(a.Hi, b.Hi))
	})
	out := ports[:0:0]
	for _, p := range ports {
		if n := len(out); n > 0 && out[n-1].Proto == p.Proto && int(p.Lo) <= int(out[n-1].Hi)+1 {
			out[n-1].Hi = max(out[n-1].Hi, p.Hi)
			continue
		}
		out = append(out, p)
	}
	return out
}
