package nodeport_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/skiff-sh/skiff/bpf/lb"
	"github.com/skiff-sh/skiff/bpf/nodeport"
	"github.com/skiff-sh/skiff/bpf/tcattach"
	"github.com/skiff-sh/skiff/testkit/bpffstest"
	"github.com/skiff-sh/skiff/testkit/vethns"
)

// TestAttachedInBothModes: on a real interface, in each mode, the programs drop a connection
// to a node port without backends and pass other traffic; a second Load on the same pin path
// (a restarted proxy) leaves one attachment per side, its own programs; Remove leaves none.
func TestAttachedInBothModes(t *testing.T) {
	for _, m := range []tcattach.Mode{tcattach.TCX, tcattach.Legacy} {
		t.Run(string(m), func(t *testing.T) {
			pin := bpffstest.PinDir(t)
			p := vethns.New(t)
			// The pod side plays the node: the programs go on its eth0, the client is the other end.
			ln := p.Sink(t, p.Pod, ":0")
			open := uint16(ln.Addr().(*net.TCPAddr).Port)
			connects := func(port uint16) bool {
				return p.Connect(t, p.Node, netip.AddrPortFrom(p.PodAddr, port).String()) == nil
			}
			load := func() *nodeport.Dataplane {
				t.Helper()
				d, err := nodeport.LoadMode(nodeport.Options{PinPath: pin}, m)
				if err != nil {
					t.Fatal(err)
				}
				p.Do(t, p.Pod, func() {
					if err := d.Attach("eth0"); err != nil {
						t.Fatal(err)
					}
				})
				if d.Mode() != m {
					t.Fatalf("mode %s, want %s", d.Mode(), m)
				}
				return d
			}
			d := load()
			if err := d.Set(nodeport.Key{Addr: p.PodAddr, Port: open, Proto: lb.TCP}, nil); err != nil {
				t.Fatal(err)
			}
			if connects(open) {
				t.Fatalf("port %d without backends: connected, want dropped", open)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			d = load()
			defer d.Close()
			if connects(open) {
				t.Fatalf("after a second Load: port %d connected, want dropped", open)
			}
			in, eg := nodeport.Programs(d)
			p.Do(t, p.Pod, func() {
				ifc, err := net.InterfaceByName("eth0")
				if err != nil {
					t.Fatal(err)
				}
				for _, side := range []struct {
					egress bool
					prog   *ebpf.Program
				}{{false, in}, {true, eg}} {
					tcx, tc, err := tcattach.Programs(ifc.Index, side.egress)
					if err != nil {
						t.Fatal(err)
					}
					info, _ := side.prog.Info()
					id, _ := info.ID()
					got := map[tcattach.Mode][]ebpf.ProgramID{tcattach.TCX: tcx, tcattach.Legacy: tc}[m]
					if len(tcx)+len(tc) != 1 || len(got) != 1 || got[0] != id {
						t.Fatalf("egress %v: tcx %v, tc %v; want only program %d by %s", side.egress, tcx, tc, id, m)
					}
				}
				if err := d.Remove(); err != nil {
					t.Fatal(err)
				}
				for _, egress := range []bool{false, true} {
					if tcx, tc, err := tcattach.Programs(ifc.Index, egress); err != nil || len(tcx)+len(tc) != 0 {
						t.Fatalf("after Remove: tcx %v, tc %v (%v)", tcx, tc, err)
					}
				}
			})
			if !connects(open) {
				t.Fatalf("after Remove: port %d unreachable", open)
			}
		})
	}
}
