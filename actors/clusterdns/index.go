package clusterdns

import (
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// index is the zone as the cached Services and EndpointSlices make it: owner name -> records,
// replaced one Service at a time by the actor and read by the server's goroutines. A query
// costs a map lookup and no allocation; an event costs the records of its one Service. A
// name's slice is never changed in place (an event builds a new one), so a reader may keep
// it after the lock is released.
type index struct {
	zone    string // lower case, fully qualified
	dotZone string // "." + zone

	mu     sync.RWMutex
	bySvc  map[string][]dns.RR // service key -> its records
	names  map[string][]dns.RR // owner -> records of every Service at it
	nodes  map[string]int      // owners and their ancestors in the zone -> records at or below
	serial uint32              // the SOA serial: when the zone last changed
}

func newIndex(zone string) *index {
	return &index{zone: zone, dotZone: "." + zone, bySvc: map[string][]dns.RR{}, names: map[string][]dns.RR{}, nodes: map[string]int{}, serial: uint32(time.Now().Unix())}
}

// set replaces the records of one Service (none: it is gone).
func (x *index) set(key string, rrs []dns.RR) {
	x.mu.Lock()
	defer x.mu.Unlock()
	// The old records leave their owners' slices, each owner's filtered once.
	gone := map[string]map[dns.RR]bool{}
	for _, rr := range x.bySvc[key] {
		owner := rr.Header().Name
		if gone[owner] == nil {
			gone[owner] = map[dns.RR]bool{}
		}
		gone[owner][rr] = true
		x.count(owner, -1)
	}
	for owner, drop := range gone {
		kept := make([]dns.RR, 0, len(x.names[owner]))
		for _, rr := range x.names[owner] {
			if !drop[rr] {
				kept = append(kept, rr)
			}
		}
		x.names[owner] = kept
		if len(kept) == 0 {
			delete(x.names, owner)
		}
	}
	delete(x.bySvc, key)
	if len(rrs) > 0 {
		x.bySvc[key] = rrs
	}
	add := map[string][]dns.RR{}
	for _, rr := range rrs {
		owner := rr.Header().Name
		add[owner] = append(add[owner], rr)
		x.count(owner, 1)
	}
	for owner, more := range add {
		old := x.names[owner]
		x.names[owner] = append(old[:len(old):len(old)], more...) // a new array: readers may hold the old
	}
	x.serial = max(x.serial+1, uint32(time.Now().Unix()))
}

// count adds d to the owner and each ancestor below the zone's apex, so that an empty
// non-terminal (<ns>.svc.<zone>, _tcp.<svc>...) answers NODATA rather than NXDOMAIN.
func (x *index) count(owner string, d int) {
	if !x.in(owner) {
		return // reverse names: no NODATA answers there
	}
	for n := owner; len(n) > len(x.zone); {
		if x.nodes[n] += d; x.nodes[n] <= 0 {
			delete(x.nodes, n)
		}
		_, rest, _ := strings.Cut(n, ".")
		n = rest
	}
}

// in tells whether name (lower case, fully qualified) is the zone or below it. A suffix
// check, a third of a query's time less than dns.IsSubDomain's label split; an escaped name
// (a\.b) takes the label-wise way.
func (x *index) in(name string) bool {
	if strings.IndexByte(name, '\\') >= 0 {
		return dns.IsSubDomain(x.zone, name)
	}
	return name == x.zone || strings.HasSuffix(name, x.dotZone)
}

// lookup returns the records at name (lower case, fully qualified), which the caller must not
// change, and whether the name exists in the zone at all.
func (x *index) lookup(name string) ([]dns.RR, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	rrs := x.names[name]
	return rrs[:len(rrs):len(rrs)], len(rrs) > 0 || x.nodes[name] > 0 || name == x.zone
}

// soa is the zone's SOA record, with CoreDNS's timers; its minimum is the negative TTL.
func (x *index) soa() *dns.SOA {
	x.mu.RLock()
	serial := x.serial
	x.mu.RUnlock()
	return &dns.SOA{Hdr: hdr(x.zone, dns.TypeSOA), Ns: "ns.dns." + x.zone, Mbox: "hostmaster." + x.zone,
		Serial: serial, Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: TTL}
}
