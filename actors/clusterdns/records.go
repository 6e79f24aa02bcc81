package clusterdns

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
)

// TTL is the TTL of every answer from the cluster zone (CoreDNS's kubernetes plugin default):
// short, so a client sees a changed Service soon after the server does.
const TTL = 5

// serviceRecords are the records one Service puts in the zone (the Kubernetes DNS
// specification, v1.1.0), with lower-case owner names:
//   - ClusterIP: A/AAAA <svc>.<ns>.svc.<zone> per ClusterIP, SRV per named port, PTR per ClusterIP;
//   - headless: A/AAAA of each ready endpoint (every endpoint when publishNotReadyAddresses),
//     <hostname>.<svc>... per endpoint (the dashed IP when it has no hostname), SRV per named
//     port and endpoint, PTR per endpoint address;
//   - ExternalName: a CNAME to the external name.
func serviceRecords(svc *dnsService, slices []*dnsSlice, zone string) []dns.RR {
	base := strings.ToLower(svc.Name + "." + svc.Namespace + ".svc." + zone)
	switch {
	case svc.Type == corev1.ServiceTypeExternalName:
		if svc.ExternalName == "" {
			return nil
		}
		return []dns.RR{&dns.CNAME{Hdr: hdr(base, dns.TypeCNAME), Target: dns.Fqdn(strings.ToLower(svc.ExternalName))}}
	case svc.headless():
		return headless(svc, slices, base)
	}
	var out []dns.RR
	for _, s := range svc.ClusterIPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		out = append(out, addr(base, a), ptr(a, base))
	}
	for _, p := range svc.Ports {
		out = append(out, srv(p.Name, p.Protocol, base, uint16(p.Port), base))
	}
	return out
}

func headless(svc *dnsService, slices []*dnsSlice, base string) []dns.RR {
	var out []dns.RR
	seen := map[string]bool{} // owner/type/data: an endpoint listed in two slices counts once
	add := func(rr dns.RR) {
		if k := rr.String(); !seen[k] {
			seen[k] = true
			out = append(out, rr)
		}
	}
	for _, es := range slices {
		for _, ep := range es.Endpoints {
			if !svc.PublishNotReady && !ep.Ready {
				continue
			}
			for _, s := range ep.Addresses {
				a, err := netip.ParseAddr(s)
				if err != nil {
					continue
				}
				a = a.Unmap()
				host := dashed(a)
				if ep.Hostname != "" {
					host = strings.ToLower(ep.Hostname)
				}
				name := host + "." + base
				add(addr(base, a))
				add(addr(name, a))
				add(ptr(a, name))
				for _, p := range es.Ports {
					add(srv(p.Name, p.Protocol, base, uint16(p.Port), name))
				}
			}
		}
	}
	return out
}

func hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: TTL}
}

func addr(name string, a netip.Addr) dns.RR {
	if a.Is4() {
		return &dns.A{Hdr: hdr(name, dns.TypeA), A: a.AsSlice()}
	}
	return &dns.AAAA{Hdr: hdr(name, dns.TypeAAAA), AAAA: a.AsSlice()}
}

func ptr(a netip.Addr, target string) dns.RR {
	rev, _ := dns.ReverseAddr(a.String()) // a is a valid address
	return &dns.PTR{Hdr: hdr(rev, dns.TypePTR), Ptr: target}
}

// srv is _<port>._<proto>.<base> pointing at target:port; an unknown protocol is TCP, as the
// API defaults it.
func srv(port string, proto corev1.Protocol, base string, number uint16, target string) dns.RR {
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	owner := "_" + strings.ToLower(port) + "._" + strings.ToLower(string(proto)) + "." + base
	return &dns.SRV{Hdr: hdr(owner, dns.TypeSRV), Priority: 0, Weight: 100, Port: number, Target: target}
}

// dashed is an endpoint's name when it has no hostname: 10-1-2-3, or fd00--1 for IPv6 (as
// CoreDNS names them).
func dashed(a netip.Addr) string {
	if a.Is4() {
		return strings.ReplaceAll(a.String(), ".", "-")
	}
	return strings.ReplaceAll(a.String(), ":", "-")
}
