package lb

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

func tcpBackends(t *testing.T, n int) ([]Backend, []string) {
	t.Helper()
	return backends(t, n, "tcp", func(addr, name string) net.Addr { return startTCP(t, addr, name) })
}

func udpBackends(t *testing.T, n int) ([]Backend, []string) {
	t.Helper()
	return backends(t, n, "udp", func(addr, name string) net.Addr { return startUDP(t, addr, name) })
}

// backends starts n named backends on 127.0.0.2, .3, ...
func backends(t *testing.T, n int, proto string, start func(addr, name string) net.Addr) ([]Backend, []string) {
	t.Helper()
	var bes []Backend
	var names []string
	for i := range n {
		name := fmt.Sprintf("%s-%d", proto, i)
		a := netip.MustParseAddrPort(start(fmt.Sprintf("127.0.0.%d:0", i+2), name).String())
		bes = append(bes, Backend{Addr: a.Addr(), Port: a.Port()})
		names = append(names, name)
	}
	return bes, names
}

func mustUpsert(t *testing.T, dp *Dataplane, k ServiceKey, s ServiceSpec) Stats {
	t.Helper()
	st, err := dp.Upsert(k, s)
	if err != nil {
		t.Fatalf("upsert %v: %v", k, err)
	}
	return st
}

var vip = netip.MustParseAddr("10.96.0.10")

func TestTCPConnectReachesAndSpreads(t *testing.T) {
	e := newEnv(t)
	bes, names := tcpBackends(t, 3)
	k := ServiceKey{VIP: vip, Port: 80, Proto: TCP}
	mustUpsert(t, e.dp, k, ServiceSpec{Backends: bes})

	r := e.must(request{Op: "tcp", Addr: "10.96.0.10:80"})
	if r.Body == "" {
		t.Fatalf("no greeting via VIP: %+v", r)
	}

	counts := e.must(request{Op: "tcpn", Addr: "10.96.0.10:80", N: 300}).Counts
	for _, n := range names {
		if counts[n] == 0 {
			t.Errorf("backend %s got no connection of 300: %v", n, counts)
		}
	}

	// Remove backend 0: no new connection may reach it.
	mustUpsert(t, e.dp, k, ServiceSpec{Backends: bes[1:]})
	counts = e.must(request{Op: "tcpn", Addr: "10.96.0.10:80", N: 200}).Counts
	if counts[names[0]] != 0 {
		t.Errorf("removed backend still reached: %v", counts)
	}
	if counts[names[1]]+counts[names[2]] != 200 {
		t.Errorf("connections lost: %v", counts)
	}
}

func TestUnknownAddressUntouched(t *testing.T) {
	e := newEnv(t)
	direct := startTCP(t, "127.0.0.9:0", "direct")
	bes, _ := tcpBackends(t, 1)
	ip := netip.MustParseAddr("127.0.0.9")
	// Same IP, other port; same port, other protocol: neither may match.
	mustUpsert(t, e.dp, ServiceKey{VIP: ip, Port: uint16(direct.Port + 1), Proto: TCP}, ServiceSpec{Backends: bes})
	mustUpsert(t, e.dp, ServiceKey{VIP: ip, Port: uint16(direct.Port), Proto: UDP}, ServiceSpec{Backends: bes})

	r := e.must(request{Op: "tcp", Addr: direct.String()})
	if r.Body != "direct" || r.Peer != direct.String() {
		t.Fatalf("plain connect was translated: %+v", r)
	}
}

func TestServiceWithoutBackendsRefuses(t *testing.T) {
	e := newEnv(t)
	mustUpsert(t, e.dp, ServiceKey{VIP: vip, Port: 81, Proto: TCP}, ServiceSpec{})
	r := e.do(request{Op: "tcp", Addr: "10.96.0.10:81"})
	if syscall.Errno(r.Errno) != syscall.ECONNREFUSED {
		t.Fatalf("want ECONNREFUSED, got %+v", r)
	}
}

func TestUDPReplyComesFromVIP(t *testing.T) {
	e := newEnv(t)
	bes, names := udpBackends(t, 2)
	k := ServiceKey{VIP: vip, Port: 53, Proto: UDP}
	mustUpsert(t, e.dp, k, ServiceSpec{Backends: bes})

	// Unconnected: sendto the VIP, recvfrom must report the VIP.
	r := e.must(request{Op: "udp", ID: "u", Addr: "10.96.0.10:53"})
	if r.From != "10.96.0.10:53" {
		t.Fatalf("reply source %q, want the VIP (%+v)", r.From, r)
	}
	first := r.Body
	// The socket stays on its backend while that backend is in the Service.
	for range 20 {
		if r := e.must(request{Op: "udp", ID: "u", Addr: "10.96.0.10:53"}); r.Body != first {
			t.Fatalf("unconnected socket moved from %s to %s", first, r.Body)
		}
	}
	// Remove it: the next datagram is re-selected to the other backend.
	other := bes[0]
	if first == names[0] {
		other = bes[1]
	}
	mustUpsert(t, e.dp, k, ServiceSpec{Backends: []Backend{other}})
	r = e.must(request{Op: "udp", ID: "u", Addr: "10.96.0.10:53"})
	if r.Body == first || r.From != "10.96.0.10:53" {
		t.Fatalf("after removing %s: %+v", first, r)
	}

	// Connected: getpeername and recvmsg both report the VIP.
	r = e.must(request{Op: "udpconn", ID: "c", Addr: "10.96.0.10:53"})
	if r.Peer != "10.96.0.10:53" || r.From != "10.96.0.10:53" {
		t.Fatalf("connected UDP sees a backend: %+v", r)
	}
}

func TestConnectedUDPToRemovedBackendIsAborted(t *testing.T) {
	e := newEnv(t)
	if e.dp.term == nil {
		t.Skipf("kernel lacks BPF socket destroy: %v", e.dp.termErr)
	}
	bes, names := udpBackends(t, 2)
	k := ServiceKey{VIP: vip, Port: 53, Proto: UDP}
	mustUpsert(t, e.dp, k, ServiceSpec{Backends: bes})
	r := e.must(request{Op: "udpconn", ID: "c", Addr: "10.96.0.10:53"})
	keep := bes[0]
	if r.Body == names[0] {
		keep = bes[1]
	}
	mustUpsert(t, e.dp, k, ServiceSpec{Backends: []Backend{keep}})
	r2 := e.do(request{Op: "udpconn", ID: "c", Addr: "10.96.0.10:53"})
	// The abort disconnects the socket: a send fails with EDESTADDRREQ
	// (a pending receive would see ECONNABORTED).
	if e := syscall.Errno(r2.Errno); e != syscall.ECONNABORTED && e != syscall.EDESTADDRREQ {
		t.Fatalf("socket pinned to the removed backend was not aborted: %+v", r2)
	}
	e.must(request{Op: "close", ID: "c"})
	r3 := e.must(request{Op: "udpconn", ID: "c", Addr: "10.96.0.10:53"})
	if r3.Body == r.Body {
		t.Fatalf("reconnect reached the removed backend %s", r.Body)
	}
	// Another change that keeps this backend leaves the socket alone.
	extra, _ := udpBackends(t, 1)
	mustUpsert(t, e.dp, k, ServiceSpec{Backends: []Backend{keep, extra[0]}})
	mustUpsert(t, e.dp, k, ServiceSpec{Backends: []Backend{keep}})
	if r4 := e.must(request{Op: "udpconn", ID: "c", Addr: "10.96.0.10:53"}); r4.Body != r3.Body {
		t.Fatalf("healthy socket moved: %+v", r4)
	}
}

func TestClientIPAffinity(t *testing.T) {
	e := newEnv(t)
	bes, names := tcpBackends(t, 3)
	k := ServiceKey{VIP: vip, Port: 80, Proto: TCP}
	mustUpsert(t, e.dp, k, ServiceSpec{Backends: bes, AffinityTimeout: time.Hour})
	counts := e.must(request{Op: "tcpn", Addr: "10.96.0.10:80", N: 50}).Counts
	if len(counts) != 1 {
		t.Fatalf("affinity broken: %v", counts)
	}
	var sticky string
	for n := range counts {
		sticky = n
	}
	// Drop the sticky backend: the client moves, and sticks again.
	var rest []Backend
	for i, n := range names {
		if n != sticky {
			rest = append(rest, bes[i])
		}
	}
	mustUpsert(t, e.dp, k, ServiceSpec{Backends: rest, AffinityTimeout: time.Hour})
	counts = e.must(request{Op: "tcpn", Addr: "10.96.0.10:80", N: 50}).Counts
	if len(counts) != 1 || counts[sticky] != 0 {
		t.Fatalf("after removing %s: %v", sticky, counts)
	}
}

func TestIPv6Service(t *testing.T) {
	e := newEnv(t)
	var bes []Backend
	for i := range 2 {
		ln, err := net.Listen("tcp", "[::1]:0")
		if err != nil {
			t.Skipf("no IPv6 loopback: %v", err)
		}
		ln.Close()
		a := startTCP(t, "[::1]:0", fmt.Sprintf("v6-%d", i))
		bes = append(bes, Backend{Addr: netip.IPv6Loopback(), Port: uint16(a.Port)})
	}
	mustUpsert(t, e.dp, ServiceKey{VIP: netip.MustParseAddr("fd00::10"), Port: 80, Proto: TCP}, ServiceSpec{Backends: bes})
	counts := e.must(request{Op: "tcpn", Addr: "[fd00::10]:80", N: 100}).Counts
	if counts["v6-0"] == 0 || counts["v6-1"] == 0 {
		t.Fatalf("v6 spread: %v", counts)
	}
}

func TestOneEndpointChangeTouchesOneService(t *testing.T) {
	dp := loadOrSkip(t, Options{})
	key := func(i int) ServiceKey {
		return ServiceKey{VIP: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: 80, Proto: TCP}
	}
	be := func(i, j int) Backend {
		return Backend{Addr: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}), Port: uint16(8000 + j)}
	}
	for i := range 1000 {
		st := mustUpsert(t, dp, key(i), ServiceSpec{Backends: []Backend{be(i, 0), be(i, 1)}})
		if st != (Stats{ServiceWrites: 1, BackendWrites: 4}) {
			t.Fatalf("create %d: %+v", i, st)
		}
	}
	before, err := dp.Dump()
	if err != nil {
		t.Fatal(err)
	}

	// One endpoint replaced in service 500: 2 new slots + 1 new member,
	// 1 service flip, 2 old slots + 1 old member freed.
	st := mustUpsert(t, dp, key(500), ServiceSpec{Backends: []Backend{be(500, 0), be(500, 2)}})
	if want := (Stats{ServiceWrites: 1, BackendWrites: 3, BackendDeletes: 3}); st != want {
		t.Fatalf("endpoint change: %+v, want %+v", st, want)
	}
	if st := mustUpsert(t, dp, key(500), ServiceSpec{Backends: []Backend{be(500, 2), be(500, 0)}}); st != (Stats{}) {
		t.Fatalf("no-op change wrote %+v", st)
	}
	if st := mustUpsert(t, dp, key(500), ServiceSpec{Backends: []Backend{be(500, 0), be(500, 2)}, AffinityTimeout: time.Minute}); st != (Stats{ServiceWrites: 1}) {
		t.Fatalf("affinity-only change: %+v", st)
	}

	after, err := dp.Dump()
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 1000 {
		t.Fatalf("dump has %d services", len(after))
	}
	changed := 0
	for i := range after {
		if fmt.Sprint(after[i]) != fmt.Sprint(before[i]) {
			changed++
			if after[i].Key != key(500) {
				t.Errorf("untouched service changed: %v -> %v", before[i], after[i])
			}
		}
	}
	if changed != 1 {
		t.Errorf("%d services changed, want 1", changed)
	}
	if n, _ := mapLen(dp.objs.Backends); n != 2000 {
		t.Errorf("backend slots: %d, want 2000 (old slots leaked?)", n)
	}
}

func TestConcurrentUpsertDelete(t *testing.T) {
	dp := loadOrSkip(t, Options{MaxServices: 1024, MaxBackends: 4096})
	const workers, services, rounds = 4, 32, 50
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			var err error
			for r := range rounds {
				for s := range services {
					k := ServiceKey{VIP: netip.AddrFrom4([4]byte{10, 96, 1, byte(s)}), Port: 80, Proto: TCP}
					if (r+w+s)%5 == 0 {
						err = errors.Join(err, dp.Delete(k))
						continue
					}
					var bes []Backend
					for j := range 1 + (r+w)%4 {
						bes = append(bes, Backend{Addr: netip.AddrFrom4([4]byte{10, 244, byte(w), byte(j)}), Port: 80})
					}
					_, e := dp.Upsert(k, ServiceSpec{Backends: bes})
					err = errors.Join(err, e)
				}
			}
			errs <- err
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	dump, err := dp.Dump()
	if err != nil {
		t.Fatal(err)
	}
	slots := 0
	for _, s := range dump {
		slots += len(s.Backends)
	}
	if n, _ := mapLen(dp.objs.Backends); n != slots {
		t.Errorf("backend map holds %d slots, services use %d", n, slots)
	}
	if hw := dp.revs.highWater(); hw > services+workers {
		t.Errorf("slot generations reached %d for %d services: free list not reused", hw, services)
	}
}

func TestCloseDetachesEverything(t *testing.T) {
	needRoot(t)
	dp, err := Load(Options{})
	if err != nil {
		t.Skipf("kernel cannot load the socket LB programs: %v", err)
	}
	child := cgroupChild(t)
	if err := dp.Attach(child); err != nil {
		t.Fatal(err)
	}
	ids, err := dp.ProgramIDs()
	if err != nil {
		t.Fatal(err)
	}
	cg, err := os.Open(child)
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	attached := func() int {
		n := 0
		for _, h := range dp.hooks() {
			q, err := link.QueryPrograms(link.QueryOptions{Target: int(cg.Fd()), Attach: h.at})
			if err != nil {
				t.Fatalf("query %v: %v", h.at, err)
			}
			n += len(q.Programs)
		}
		return n
	}
	if n := attached(); n != 8 {
		t.Fatalf("%d programs attached, want 8", n)
	}
	if err := dp.Close(); err != nil {
		t.Fatal(err)
	}
	if n := attached(); n != 0 {
		t.Fatalf("%d programs still attached after Close", n)
	}
	// Programs are freed asynchronously once the last reference drops.
	deadline := time.Now().Add(5 * time.Second)
	for _, id := range ids {
		for {
			p, err := ebpf.NewProgramFromID(id)
			if err != nil {
				break
			}
			p.Close()
			if time.Now().After(deadline) {
				t.Fatalf("program %d still loaded after Close", id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
