package nodeport_test

import (
	"encoding/binary"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/skiff-sh/skiff/bpf/lb"
	"github.com/skiff-sh/skiff/bpf/nodeport"
	"github.com/skiff-sh/skiff/testkit/bpffstest"
	"github.com/skiff-sh/skiff/testkit/needs"
)

const (
	actOK   = 0 // TC_ACT_OK
	actShot = 2 // TC_ACT_SHOT
)

var (
	node    = netip.MustParseAddr("10.0.0.1")
	client  = netip.MustParseAddr("192.0.2.7")
	backend = netip.MustParseAddr("10.1.0.5")
)

func load(t *testing.T) *nodeport.Dataplane {
	t.Helper()
	if os.Geteuid() != 0 {
		needs.Skip(t, "loading tc programs needs root")
	}
	d, err := nodeport.Load(nodeport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// packet is an Ethernet + IPv4 + TCP/UDP frame with correct checksums.
func packet(proto lb.Proto, src, dst netip.AddrPort) []byte {
	l4len := 20
	if proto == lb.UDP {
		l4len = 8
	}
	b := make([]byte, 14+20+l4len)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+l4len))
	ip[8], ip[9] = 64, byte(proto)
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[10:], ^sum(0, ip))
	l4 := b[34:]
	binary.BigEndian.PutUint16(l4[0:], src.Port())
	binary.BigEndian.PutUint16(l4[2:], dst.Port())
	if proto == lb.TCP {
		l4[12] = 5 << 4
		l4[13] = 0x02 // SYN
		binary.BigEndian.PutUint16(l4[16:], ^sum(pseudo(ip, l4len), l4))
	} else {
		binary.BigEndian.PutUint16(l4[4:], uint16(l4len))
		binary.BigEndian.PutUint16(l4[6:], ^sum(pseudo(ip, l4len), l4))
	}
	return b
}

func pseudo(ip []byte, l4len int) uint32 {
	var p [12]byte
	copy(p[:8], ip[12:20])
	p[9] = ip[9]
	binary.BigEndian.PutUint16(p[10:], uint16(l4len))
	return uint32(sum(0, p[:]))
}

func sum(acc uint32, b []byte) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		acc += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for acc>>16 != 0 {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}

// tuple reads a frame's addresses and checks both checksums.
func tuple(t *testing.T, b []byte) (src, dst netip.AddrPort) {
	t.Helper()
	ip, l4 := b[14:34], b[34:]
	if sum(0, ip) != 0xffff {
		t.Fatalf("bad IP checksum in % x", ip)
	}
	if sum(pseudo(ip, len(l4)), l4) != 0xffff {
		t.Fatalf("bad L4 checksum in % x", l4)
	}
	s, d := [4]byte(ip[12:16]), [4]byte(ip[16:20])
	return netip.AddrPortFrom(netip.AddrFrom4(s), binary.BigEndian.Uint16(l4[0:])),
		netip.AddrPortFrom(netip.AddrFrom4(d), binary.BigEndian.Uint16(l4[2:]))
}

func run(t *testing.T, prog *ebpf.Program, in []byte) (uint32, []byte) {
	t.Helper()
	out := make([]byte, len(in)+64)
	ret, err := prog.Run(&ebpf.RunOptions{Data: in, DataOut: out})
	if err != nil {
		t.Fatal(err)
	}
	return ret, out[:len(in)]
}

// TestLocalBackendKeepsClient: traffic to node:nodePort with a backend on this node is
// translated to the backend with the client's address kept (DNAT only), its reply leaves with
// the node's address and port, checksums right both ways, for TCP and UDP.
func TestLocalBackendKeepsClient(t *testing.T) {
	d := load(t)
	in, eg := nodeport.Programs(d)
	for _, proto := range []lb.Proto{lb.TCP, lb.UDP} {
		key := nodeport.Key{Addr: node, Port: 30080, Proto: proto}
		if err := d.Set(key, []nodeport.Backend{{Addr: backend, Port: 8080, Local: true}}); err != nil {
			t.Fatal(err)
		}
		from, to := netip.AddrPortFrom(client, 40000), netip.AddrPortFrom(node, 30080)
		ret, out := run(t, in, packet(proto, from, to))
		if ret != actOK {
			t.Fatalf("%v ingress: verdict %d", proto, ret)
		}
		src, dst := tuple(t, out)
		if src != from || dst != netip.AddrPortFrom(backend, 8080) {
			t.Fatalf("%v ingress: %v -> %v, want %v -> %v:8080", proto, src, dst, from, backend)
		}
		ret, out = run(t, eg, packet(proto, netip.AddrPortFrom(backend, 8080), from))
		if ret != actOK {
			t.Fatalf("%v egress: verdict %d", proto, ret)
		}
		if src, dst = tuple(t, out); src != to || dst != from {
			t.Fatalf("%v reply: %v -> %v, want %v -> %v", proto, src, dst, to, from)
		}
		// The backend goes: the same flow (a UDP client keeping its port) moves to the new one.
		moved := netip.MustParseAddr("10.1.0.6")
		if err := d.Set(key, []nodeport.Backend{{Addr: moved, Port: 8080, Local: true}}); err != nil {
			t.Fatal(err)
		}
		_, out = run(t, in, packet(proto, from, to))
		if _, dst = tuple(t, out); dst != netip.AddrPortFrom(moved, 8080) {
			t.Fatalf("%v after the backend changed: to %v, want %v:8080", proto, dst, moved)
		}
	}
}

// TestNotOursPassesNoBackendsDrops: other traffic is untouched; a known port without
// backends (Local policy on a node without endpoints) is dropped.
func TestNotOursPassesNoBackendsDrops(t *testing.T) {
	d := load(t)
	in, _ := nodeport.Programs(d)
	pkt := packet(lb.TCP, netip.AddrPortFrom(client, 40000), netip.AddrPortFrom(node, 22))
	if ret, out := run(t, in, pkt); ret != actOK || !slices.Equal(out, pkt) {
		t.Fatalf("unrelated packet: verdict %d, changed %v", ret, !slices.Equal(out, pkt))
	}
	key := nodeport.Key{Addr: node, Port: 30081, Proto: lb.TCP}
	if err := d.Set(key, nil); err != nil {
		t.Fatal(err)
	}
	if ret, _ := run(t, in, packet(lb.TCP, netip.AddrPortFrom(client, 40001), netip.AddrPortFrom(node, 30081))); ret != actShot {
		t.Fatalf("no backends: verdict %d, want drop", ret)
	}
	es, err := d.Dump()
	if err != nil || len(es) != 1 || es[0].Key != key || len(es[0].Backends) != 0 {
		t.Fatalf("dump %+v %v", es, err)
	}
	if err := d.Delete(key); err != nil {
		t.Fatal(err)
	}
	if es, _ := d.Dump(); len(es) != 0 {
		t.Fatalf("after delete: %+v", es)
	}
}

// backends returns n local backends 10.2.x.y:8080.
func backends(n int) []nodeport.Backend {
	out := make([]nodeport.Backend, n)
	for i := range out {
		out[i] = nodeport.Backend{Addr: netip.AddrFrom4([4]byte{10, 2, byte(i / 250), byte(1 + i%250)}), Port: 8080, Local: true}
	}
	return out
}

func wantSlots(t *testing.T, d *nodeport.Dataplane, want int) {
	t.Helper()
	wantSlotsMembers(t, d, want, want)
}

func wantSlotsMembers(t *testing.T, d *nodeport.Dataplane, wantSlots, wantMembers int) {
	t.Helper()
	slots, members, err := nodeport.SlotsAndMembers(d)
	if err != nil || slots != wantSlots || members != wantMembers {
		t.Fatalf("slots %d, members %d (%v), want %d and %d", slots, members, err, wantSlots, wantMembers)
	}
}

// TestManyBackendsAllChosen: an entry with several hundred endpoints (far past what one map
// value holds) spreads new flows over every one of them; an established flow keeps its
// backend when the set changes around it and moves only when its backend goes; the old
// set's slots and members are freed by each change.
func TestManyBackendsAllChosen(t *testing.T) {
	d := load(t)
	in, _ := nodeport.Programs(d)
	const n = 300
	key := nodeport.Key{Addr: node, Port: 30090, Proto: lb.TCP}
	bs := backends(n)
	if err := d.Set(key, bs); err != nil {
		t.Fatal(err)
	}
	wantSlots(t, d, n)
	if es, err := d.Dump(); err != nil || len(es) != 1 || !slices.Equal(es[0].Backends, bs) {
		t.Fatalf("dump: %d entries (%v), want the %d backends", len(es), err, n)
	}
	to := netip.AddrPortFrom(node, 30090)
	flowTo := func(port uint16) netip.AddrPort {
		t.Helper()
		ret, out := run(t, in, packet(lb.TCP, netip.AddrPortFrom(client, port), to))
		if ret != actOK {
			t.Fatalf("flow from port %d: verdict %d", port, ret)
		}
		_, dst := tuple(t, out)
		return dst
	}
	seen := map[netip.AddrPort]int{}
	const flows = 8000 // a backend missing by chance: n*(1-1/n)^flows < 1e-9
	for i := range flows {
		seen[flowTo(uint16(10000+i))]++
	}
	for _, b := range bs {
		if seen[netip.AddrPortFrom(b.Addr, b.Port)] == 0 {
			t.Fatalf("backend %v got none of %d flows (%d backends chosen)", b.Addr, flows, len(seen))
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct destinations, want %d", len(seen), n)
	}

	// The set shrinks to 200 that keep flow 10000's backend, and grows again.
	first := flowTo(10000)
	var keep []nodeport.Backend
	for _, b := range bs {
		if netip.AddrPortFrom(b.Addr, b.Port) == first || len(keep) < 199 {
			keep = append(keep, b)
		}
	}
	for _, set := range [][]nodeport.Backend{keep, append(slices.Clone(keep), backends(n + 50)[n:]...)} {
		if err := d.Set(key, set); err != nil {
			t.Fatal(err)
		}
		wantSlots(t, d, len(set))
		for range 20 {
			if got := flowTo(10000); got != first {
				t.Fatalf("established flow moved from %v to %v while its backend stayed", first, got)
			}
		}
	}
	without := slices.DeleteFunc(slices.Clone(keep), func(b nodeport.Backend) bool { return netip.AddrPortFrom(b.Addr, b.Port) == first })
	if err := d.Set(key, without); err != nil {
		t.Fatal(err)
	}
	if got := flowTo(10000); got == first {
		t.Fatalf("flow stayed on removed backend %v", first)
	}
	if err := d.Delete(key); err != nil {
		t.Fatal(err)
	}
	wantSlots(t, d, 0)
}

// TestPinnedAdoptedAndSwept: a Load on the same pin directory adopts the entries (Dump reads
// them back), sweeps what a Set stopped half way left, and Remove leaves nothing pinned.
func TestPinnedAdoptedAndSwept(t *testing.T) {
	if os.Geteuid() != 0 {
		needs.Skip(t, "loading tc programs needs root")
	}
	pin := bpffstest.PinDir(t)
	d1, err := nodeport.Load(nodeport.Options{PinPath: pin})
	if err != nil {
		t.Fatal(err)
	}
	key := nodeport.Key{Addr: node, Port: 30091, Proto: lb.UDP}
	bs := backends(100)
	if err := d1.Set(key, bs); err != nil {
		t.Fatal(err)
	}
	stray := nodeport.Backend{Addr: netip.MustParseAddr("10.9.9.9"), Port: 9, Local: true}
	if err := nodeport.LeaveHalfDone(d1, key, stray); err != nil {
		t.Fatal(err)
	}
	wantSlotsMembers(t, d1, 101, 101)
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}
	d2, err := nodeport.Load(nodeport.Options{PinPath: pin})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	wantSlotsMembers(t, d2, 100, 100)
	if es, err := d2.Dump(); err != nil || len(es) != 1 || !slices.Equal(es[0].Backends, bs) {
		t.Fatalf("adopted dump: %d entries (%v), want the 100 backends", len(es), err)
	}
	if es, err := nodeport.DumpPinned(pin); err != nil || len(es) != 1 || len(es[0].Backends) != 100 {
		t.Fatalf("DumpPinned: %d entries (%v)", len(es), err)
	}
	if err := d2.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pin); !os.IsNotExist(err) {
		t.Fatalf("pin directory after Remove: %v", err)
	}
}
