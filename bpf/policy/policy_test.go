package policy

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/skiff-sh/skiff/testkit/bpffstest"
)

// The programs run on packets the test writes (BPF_PROG_TEST_RUN): each case is what the
// kernel decides for one packet, against maps written through the package's API.

const (
	pass = ^uint32(0) // TCX_NEXT
	drop = 2          // TCX_DROP
)

const (
	tcpSYN = 0x02
	tcpACK = 0x10
)

func load(t *testing.T) *Dataplane {
	t.Helper()
	dp, err := Load(bpffstest.PinDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	return dp
}

// packet is an Ethernet frame carrying IPv4 and a TCP (flags) or UDP header.
func packet(src, dst string, proto uint8, sport, dport uint16, flags uint8) []byte {
	b := make([]byte, 14+20+20)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(b)-14))
	ip[8] = 64
	ip[9] = proto
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	l4 := ip[20:]
	binary.BigEndian.PutUint16(l4[0:], sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	if proto == ProtoTCP {
		l4[12] = 5 << 4
		l4[13] = flags
	}
	return b
}

func run(t *testing.T, prog *ebpf.Program, pkt []byte) uint32 {
	t.Helper()
	ret, err := prog.Run(&ebpf.RunOptions{Data: pkt})
	if err != nil {
		t.Fatal(err)
	}
	return ret
}

func TestProgramsEnforceRules(t *testing.T) {
	dp := load(t)
	to, from := dp.objs.ToPod, dp.objs.FromPod
	web := netip.MustParseAddr("10.88.0.2")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(dp.SetHostAddrs([]netip.Addr{netip.MustParseAddr("10.88.0.1")}))
	must(dp.SetRule(RuleKey{Pod: web, Dir: Ingress, Peer: netip.MustParsePrefix("10.0.0.0/8")},
		[]PortRange{{Proto: ProtoTCP, Lo: 8080, Hi: 8090}, {Proto: ProtoUDP, Lo: 53, Hi: 53}}))
	must(dp.SetRule(RuleKey{Pod: web, Dir: Ingress, Peer: netip.MustParsePrefix("10.1.0.0/16")}, nil)) // an except
	must(dp.SetRule(RuleKey{Pod: web, Dir: Ingress, Peer: netip.MustParsePrefix("10.1.2.3/32")}, []PortRange{{Proto: ProtoAny}}))
	must(dp.SetRule(RuleKey{Pod: web, Dir: Egress, Peer: netip.MustParsePrefix("10.88.0.9/32")}, []PortRange{{Proto: ProtoTCP, Lo: 5432, Hi: 5432}}))

	// Not isolated yet: everything passes.
	if got := run(t, to, packet("192.168.0.1", "10.88.0.2", ProtoTCP, 40000, 22, tcpSYN)); got != pass {
		t.Fatalf("unisolated pod: %d", got)
	}
	must(dp.SetEndpoint(web, Endpoint{Ingress: true, Egress: true}))
	cases := []struct {
		name string
		prog *ebpf.Program
		pkt  []byte
		want uint32
	}{
		{"ingress in range", to, packet("10.5.0.1", "10.88.0.2", ProtoTCP, 40001, 8085, tcpSYN), pass},
		{"ingress endPort", to, packet("10.5.0.1", "10.88.0.2", ProtoTCP, 40002, 8090, tcpSYN), pass},
		{"ingress past endPort", to, packet("10.5.0.1", "10.88.0.2", ProtoTCP, 40003, 8091, tcpSYN), drop},
		{"ingress UDP port", to, packet("10.5.0.1", "10.88.0.2", ProtoUDP, 40004, 53, 0), pass},
		{"ingress wrong protocol", to, packet("10.5.0.1", "10.88.0.2", ProtoUDP, 40005, 8080, 0), drop},
		{"ingress outside the block", to, packet("192.168.0.1", "10.88.0.2", ProtoTCP, 40006, 8080, tcpSYN), drop},
		{"ingress from the except", to, packet("10.1.9.9", "10.88.0.2", ProtoTCP, 40007, 8080, tcpSYN), drop},
		{"ingress from a /32 inside the except, any port", to, packet("10.1.2.3", "10.88.0.2", ProtoTCP, 40008, 9999, tcpSYN), pass},
		{"ingress from the node", to, packet("10.88.0.1", "10.88.0.2", ProtoTCP, 40009, 22, tcpSYN), pass},
		{"egress allowed", from, packet("10.88.0.2", "10.88.0.9", ProtoTCP, 40010, 5432, tcpSYN), pass},
		{"egress elsewhere", from, packet("10.88.0.2", "10.88.0.8", ProtoTCP, 40011, 5432, tcpSYN), drop},
		{"egress to the node is not exempt", from, packet("10.88.0.2", "10.88.0.1", ProtoUDP, 40012, 53, 0), drop},
		// Replies of an allowed flow pass the other direction's check.
		{"reply to an allowed ingress", from, packet("10.88.0.2", "10.5.0.1", ProtoTCP, 8085, 40001, tcpSYN|tcpACK), pass},
		{"reply to an allowed egress", to, packet("10.88.0.9", "10.88.0.2", ProtoTCP, 5432, 40010, tcpSYN|tcpACK), pass},
		{"no reply without a flow", from, packet("10.88.0.2", "10.5.0.1", ProtoTCP, 8085, 49999, tcpACK), drop},
	}
	for _, c := range cases {
		if got := run(t, c.prog, c.pkt); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}

	// A flow tracked before its pod was isolated keeps flowing; a new SYN on the same
	// 5-tuple is checked again.
	old := netip.MustParseAddr("10.88.0.3")
	est := packet("192.168.0.7", "10.88.0.3", ProtoTCP, 41000, 22, tcpSYN)
	if got := run(t, to, est); got != pass {
		t.Fatalf("unisolated SYN: %d", got)
	}
	must(dp.SetEndpoint(old, Endpoint{Ingress: true}))
	if got := run(t, to, packet("192.168.0.7", "10.88.0.3", ProtoTCP, 41000, 22, tcpACK)); got != pass {
		t.Errorf("established flow after isolation: %d, want pass", got)
	}
	if got := run(t, to, est); got != drop {
		t.Errorf("new SYN on a tracked 5-tuple: %d, want drop", got)
	}

	st, err := dp.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Denied != 8 || st.Allowed == 0 || st.Tracked == 0 {
		t.Errorf("counters %+v: want 8 denied, some allowed and tracked", st)
	}
}
