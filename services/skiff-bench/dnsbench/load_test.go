package dnsbench

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/skiff-sh/skiff/testkit/dnstest"
)

// The load generator counts answered queries only: NOERROR with an answer, to the query's ID.
func TestLoadCountsAnswersOnly(t *testing.T) {
	names := []string{"a.test.", "b.test."}
	answered := dnstest.Serve(t, func(q dns.Question, m *dns.Msg) {
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.IPv4(192, 0, 2, 1)}}
	})
	r, err := load(context.Background(), answered, names, 4, 200*time.Millisecond)
	if err != nil || r.qps <= 0 || r.failed != 0 || r.p50 <= 0 || r.p99 < r.p50 {
		t.Fatalf("against a server that answers: %+v, %v", r, err)
	}
	if got := addrs(answered, names[0]); len(got) != 1 || got[0] != "192.0.2.1" {
		t.Fatalf("addrs: %q", got)
	}
	nx := dnstest.Serve(t, func(_ dns.Question, m *dns.Msg) { m.Rcode = dns.RcodeNameError })
	if r, err := load(context.Background(), nx, names, 2, 100*time.Millisecond); err == nil || !strings.Contains(err.Error(), "answered no query") {
		t.Fatalf("against NXDOMAIN: %+v, %v", r, err)
	}
}
