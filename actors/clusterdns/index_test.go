package clusterdns

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

// Two Services may put records at one name (the PTR of a pod both select): replacing one
// Service's records leaves the other's, and a reader's slice from before stays as it was.
func TestIndexSharedOwner(t *testing.T) {
	x := newIndex("cluster.local.")
	ip := netip.MustParseAddr("10.1.0.5")
	rev, _ := dns.ReverseAddr(ip.String())
	a := ptr(ip, "a.default.svc.cluster.local.")
	b := ptr(ip, "b.default.svc.cluster.local.")
	x.set("default/a", []dns.RR{a, addr("a.default.svc.cluster.local.", ip)})
	x.set("default/b", []dns.RR{b, addr("b.default.svc.cluster.local.", ip)})
	before, _ := x.lookup(rev)
	if !slices.Equal(before, []dns.RR{a, b}) {
		t.Fatalf("PTR records %v, want both Services'", before)
	}
	x.set("default/a", nil)
	if got, _ := x.lookup(rev); !slices.Equal(got, []dns.RR{b}) {
		t.Fatalf("after a is gone: %v, want b's alone", got)
	}
	if !slices.Equal(before, []dns.RR{a, b}) {
		t.Fatalf("a reader's earlier answer changed under it: %v", before)
	}
	if got, exists := x.lookup("a.default.svc.cluster.local."); len(got) != 0 || exists {
		t.Fatalf("a's name: %v exists=%v", got, exists)
	}
	if _, exists := x.lookup("default.svc.cluster.local."); !exists {
		t.Fatal("the namespace's name is gone with b still in it")
	}
}

func TestIndexIn(t *testing.T) {
	x := newIndex("cluster.local.")
	for name, want := range map[string]bool{
		"cluster.local.": true, "web.default.svc.cluster.local.": true, "xcluster.local.": false,
		"cluster.local.example.": false, "local.": false, `a\.cluster.local.`: false, `a\.b.cluster.local.`: true,
	} {
		if got := x.in(name); got != want {
			t.Errorf("in(%q) = %v, want %v", name, got, want)
		}
	}
}
