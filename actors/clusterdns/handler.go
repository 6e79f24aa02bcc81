package clusterdns

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// answer builds the reply to one query: authoritative from the index for the cluster zone and
// the reverse names of cluster addresses, forwarded upstream for everything else.
func (z *zone) answer(ctx context.Context, req *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	if len(req.Question) != 1 || req.Opcode != dns.OpcodeQuery {
		return m.SetRcode(req, dns.RcodeNotImplemented)
	}
	m.SetReply(req)
	m.RecursionAvailable = true
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	switch {
	case z.idx.in(name):
		if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
			return m.SetRcode(req, dns.RcodeRefused)
		}
		z.authoritative(ctx, m, q, name)
		return m
	case q.Qtype == dns.TypePTR:
		if rrs, _ := z.idx.lookup(name); len(rrs) > 0 {
			m.Authoritative = true
			m.Answer = rename(rrs, q.Name)
			return m
		}
	}
	z.forwardInto(ctx, m, q, req)
	return m
}

// authoritative answers a name in the cluster zone: its records of the asked type, a CNAME
// (followed), NODATA or NXDOMAIN with the zone's SOA.
func (z *zone) authoritative(ctx context.Context, m *dns.Msg, q dns.Question, name string) {
	m.Authoritative = true
	if name == z.idx.zone {
		switch q.Qtype {
		case dns.TypeSOA:
			m.Answer = []dns.RR{z.idx.soa()}
			return
		case dns.TypeNS:
			m.Answer = []dns.RR{&dns.NS{Hdr: hdr(z.idx.zone, dns.TypeNS), Ns: "ns.dns." + z.idx.zone}}
			return
		}
	}
	rrs, exists := z.idx.lookup(name)
	if rr, ok := z.podName(name); ok {
		rrs, exists = append(rrs, rr...), true
	}
	other := func(rr dns.RR) bool { return rr.Header().Rrtype != q.Qtype }
	match := rrs // every record is of the asked type, as usual: no copy
	if q.Qtype != dns.TypeANY && slices.ContainsFunc(rrs, other) {
		match = slices.DeleteFunc(slices.Clone(rrs), other)
	}
	var cname *dns.CNAME
	for _, rr := range rrs {
		if c, ok := rr.(*dns.CNAME); ok {
			cname = c
		}
	}
	switch {
	case len(match) > 0:
		m.Answer = rename(match, q.Name)
		if q.Qtype == dns.TypeSRV {
			m.Extra = z.targets(match)
		}
	case cname != nil:
		m.Answer = rename([]dns.RR{cname}, q.Name)
		z.follow(ctx, m, dns.Question{Name: cname.Target, Qtype: q.Qtype, Qclass: dns.ClassINET})
	case exists:
		m.Ns = []dns.RR{z.idx.soa()} // NODATA
	default:
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{z.idx.soa()}
	}
}

// targets are the addresses of SRV records' targets, for the additional section (as the
// Kubernetes DNS specification's examples and CoreDNS give them): a client that connects to
// every target needs no query per target.
func (z *zone) targets(srvs []dns.RR) []dns.RR {
	var out []dns.RR
	seen := map[string]bool{}
	for _, rr := range srvs {
		target := rr.(*dns.SRV).Target
		if seen[target] {
			continue // a Service's ports share a target
		}
		seen[target] = true
		rrs, _ := z.idx.lookup(target)
		for _, a := range rrs {
			if t := a.Header().Rrtype; t == dns.TypeA || t == dns.TypeAAAA {
				out = append(out, a)
			}
		}
	}
	return out
}

// podName answers <a-b-c-d>.<ns>.pod.<zone> with the address a.b.c.d (fd00--1 for IPv6), as
// CoreDNS's "pods insecure" mode (kubeadm's default) does: any well-formed address, without
// looking for a pod that has it. pod.<zone> and <ns>.pod.<zone> exist, with no records.
func (z *zone) podName(name string) ([]dns.RR, bool) {
	rest, ok := strings.CutSuffix(name, ".pod."+z.idx.zone)
	if !ok {
		return nil, name == "pod."+z.idx.zone
	}
	host, ns, ok := strings.Cut(rest, ".")
	if !ok {
		return nil, true // <ns>.pod.<zone>
	}
	if strings.Contains(ns, ".") {
		return nil, false
	}
	for _, sep := range []string{".", ":"} {
		if a, err := netip.ParseAddr(strings.ReplaceAll(host, "-", sep)); err == nil && a.Is4() == (sep == ".") {
			return []dns.RR{addr(name, a)}, true
		}
	}
	return nil, false
}

// follow appends the answer for an ExternalName's target, so stub resolvers that do not
// chase CNAMEs themselves get an address; a target the upstreams cannot resolve leaves the
// CNAME alone, for the client to try.
func (z *zone) follow(ctx context.Context, m *dns.Msg, q dns.Question) {
	if z.idx.in(strings.ToLower(q.Name)) {
		rrs, _ := z.idx.lookup(q.Name)
		for _, rr := range rrs {
			if rr.Header().Rrtype == q.Qtype {
				m.Answer = append(m.Answer, rr)
			}
		}
		return
	}
	if up, err := z.fwd.forward(ctx, q, false); err == nil && up.Rcode == dns.RcodeSuccess {
		m.Answer = append(m.Answer, up.Answer...)
	}
}

// forwardInto copies the upstream's answer into m (SERVFAIL when none answers).
func (z *zone) forwardInto(ctx context.Context, m *dns.Msg, q dns.Question, req *dns.Msg) {
	do := false
	if opt := req.IsEdns0(); opt != nil {
		do = opt.Do()
	}
	up, err := z.fwd.forward(ctx, q, do)
	if err != nil {
		z.warnUpstream(err)
		m.Rcode = dns.RcodeServerFailure
		return
	}
	m.Rcode, m.Authoritative, m.AuthenticatedData = up.Rcode, false, up.AuthenticatedData
	m.Answer, m.Ns = up.Answer, up.Ns
	for _, rr := range up.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			m.Extra = append(m.Extra, rr)
		}
	}
}

// rename copies records under the name as the client spelled it (DNS names are
// case-insensitive, and some resolvers check that the case came back as sent). Records already
// under that name are the index's, shared: nothing changes them once made.
func rename(rrs []dns.RR, name string) []dns.RR {
	if !slices.ContainsFunc(rrs, func(rr dns.RR) bool { return rr.Header().Name != name }) {
		return rrs
	}
	out := make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		out[i] = dns.Copy(rr)
		out[i].Header().Name = name
	}
	return out
}

// fit adds an OPT record when the client sent one and truncates the reply to what the client
// can take over UDP (512 bytes, or its EDNS0 buffer size).
func fit(req, m *dns.Msg, udp bool) {
	size := dns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		size = max(int(opt.UDPSize()), dns.MinMsgSize)
		m.SetEdns0(uint16(min(size, dns.DefaultMsgSize)), opt.Do())
	}
	if udp {
		m.Truncate(min(size, dns.DefaultMsgSize))
	} else {
		m.Truncate(dns.MaxMsgSize)
	}
}
