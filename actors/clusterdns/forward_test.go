package clusterdns

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/skiff-sh/skiff/testkit/dnstest"
)

// Upstream answers are cached for their TTL, at most MaxCacheTTL, with the TTLs they hand out
// aged; negative answers for the SOA's minimum; failures not at all.
func TestForwarderCacheIsTTLBounded(t *testing.T) {
	var asked atomic.Int32
	addr := dnstest.Serve(t, func(q dns.Question, m *dns.Msg) {
		asked.Add(1)
		switch q.Name {
		case "long.test.":
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 3600}, A: net.IPv4(192, 0, 2, 1)}}
		case "short.test.":
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 4}, A: net.IPv4(192, 0, 2, 2)}}
		case "nx.test.":
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: "test.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 600}, Ns: "ns.test.", Mbox: "h.test.", Minttl: 7}}
		default:
			m.Rcode = dns.RcodeServerFailure
		}
	})
	now := time.Unix(1_000_000, 0)
	f := newForwarder([]string{addr})
	f.now = func() time.Time { return now }
	ask := func(name string) *dns.Msg {
		t.Helper()
		m, err := f.forward(context.Background(), dns.Question{Name: name, Qtype: dns.TypeA, Qclass: dns.ClassINET}, false)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, name := range []string{"long.test.", "short.test.", "nx.test.", "fail.test."} {
		ask(name)
	}
	if n := asked.Load(); n != 4 {
		t.Fatalf("%d upstream queries", n)
	}
	now = now.Add(3 * time.Second)
	if m := ask("long.test."); m.Answer[0].Header().Ttl != 3597 {
		t.Fatalf("aged TTL %d", m.Answer[0].Header().Ttl)
	}
	ask("short.test.")
	ask("nx.test.")
	ask("fail.test.") // a failure is asked again
	if n := asked.Load(); n != 5 {
		t.Fatalf("%d upstream queries after 3 s, want 5 (only the failure again)", n)
	}
	now = now.Add(5 * time.Second) // 8 s: short (4 s) and nx (SOA minimum 7 s) expired
	ask("long.test.")
	ask("short.test.")
	ask("nx.test.")
	if n := asked.Load(); n != 7 {
		t.Fatalf("%d upstream queries after 8 s, want 7", n)
	}
	now = now.Add(MaxCacheTTL) // an hour's TTL is kept MaxCacheTTL at most
	ask("long.test.")
	if n := asked.Load(); n != 8 {
		t.Fatalf("%d upstream queries after %v, want 8", n, MaxCacheTTL)
	}
}
