package policy

import (
	"errors"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/skiff-sh/skiff/bpf/tcattach"
	"github.com/skiff-sh/skiff/testkit/bpffstest"
	"github.com/skiff-sh/skiff/testkit/vethns"
)

// TestAttachedEnforcesInBothModes: the programs attached to a real veth (tcx links, then
// legacy tc filters) decide real connections from the node to a pod; attaching them again
// changes nothing; a second Load and Attach (a restarted agent) keeps one attachment per
// side, now the new programs, and keeps enforcing; Remove detaches them and the pod is
// reachable again, and a closed dataplane attaches nothing.
func TestAttachedEnforcesInBothModes(t *testing.T) {
	for _, m := range []tcattach.Mode{tcattach.TCX, tcattach.Legacy} {
		t.Run(string(m), func(t *testing.T) {
			pin := bpffstest.PinDir(t)
			p := vethns.New(t)
			target := netip.AddrPortFrom(p.PodAddr, 8080).String()
			p.Sink(t, p.Pod, target)
			connects := func(step string, want bool) {
				t.Helper()
				if err := p.Connect(t, p.Node, target); (err == nil) != want {
					t.Fatalf("%s: connect to %s: %v, want success %v", step, target, err, want)
				}
			}
			attach := func() *Dataplane {
				t.Helper()
				dp, err := LoadMode(pin, m)
				if err != nil {
					t.Fatal(err)
				}
				p.Do(t, p.Node, func() {
					// The second Attach finds this dataplane's programs on and does nothing.
					for i, want := range []bool{true, false} {
						if did, err := dp.Attach(p.Index); err != nil || did != want {
							t.Fatalf("Attach %d: attached %v (%v), want %v", i+1, did, err, want)
						}
					}
				})
				return dp
			}
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}

			dp := attach()
			connects("not isolated", true)
			must(dp.SetEndpoint(p.PodAddr, Endpoint{Ingress: true}))
			connects("isolated", false)
			allow := RuleKey{Pod: p.PodAddr, Dir: Ingress, Peer: netip.PrefixFrom(p.NodeAddr, 32)}
			must(dp.SetRule(allow, []PortRange{{Proto: ProtoTCP, Lo: 8080, Hi: 8080}}))
			connects("allowed", true)
			must(dp.DeleteRule(allow))
			must(dp.Close())

			dp = attach()
			connects("isolated, after a second Load and Attach", false)
			p.Do(t, p.Node, func() {
				for _, side := range []struct {
					egress bool
					prog   *ebpf.Program
				}{{false, dp.objs.FromPod}, {true, dp.objs.ToPod}} {
					tcx, tc, err := tcattach.Programs(p.Index, side.egress)
					must(err)
					info, err := side.prog.Info()
					must(err)
					id, _ := info.ID()
					got := map[tcattach.Mode][]ebpf.ProgramID{tcattach.TCX: tcx, tcattach.Legacy: tc}
					if len(tcx)+len(tc) != 1 || !slices.Equal(got[m], []ebpf.ProgramID{id}) {
						t.Fatalf("egress %v after re-attach: tcx %v, tc %v; want only the new program %d by %s", side.egress, tcx, tc, id, m)
					}
				}
				must(dp.Remove())
				for _, egress := range []bool{false, true} {
					if tcx, tc, err := tcattach.Programs(p.Index, egress); err != nil || len(tcx)+len(tc) != 0 {
						t.Fatalf("after Remove: tcx %v, tc %v (%v)", tcx, tc, err)
					}
				}
			})
			connects("removed", true)
			p.Do(t, p.Node, func() {
				if _, err := dp.Attach(p.Index); !errors.Is(err, ErrClosed) {
					t.Fatalf("Attach after Remove: %v, want ErrClosed", err)
				}
			})
		})
	}
}

// BenchmarkAttach: a pod veth's first attach (Protect for a new pod: the kernel check that
// finds nothing, then both attaches), and an attach to a veth that holds the programs
// already (a retried sandbox, a veth the start's pass found: the check alone), against
// "reattach", what such an attach cost before it checked: both attaches again.
func BenchmarkAttach(b *testing.B) {
	for _, m := range []tcattach.Mode{tcattach.TCX, tcattach.Legacy} {
		b.Run(string(m), func(b *testing.B) {
			pin := filepath.Join(bpffstest.Mount(b), "node")
			dp, err := LoadMode(pin, m)
			if err != nil {
				b.Fatal(err)
			}
			p := vethns.New(b)
			defer p.Do(b, p.Node, func() { dp.Remove() })
			// Each sub-benchmark runs on its own goroutine: it enters the node namespace itself.
			attach := func(b *testing.B, want bool) {
				if did, err := dp.Attach(p.Index); err != nil || did != want {
					b.Fatalf("attached %v (%v), want %v", did, err, want)
				}
			}
			b.Run("first", func(b *testing.B) {
				p.Do(b, p.Node, func() {
					for b.Loop() {
						attach(b, true)
						b.StopTimer()
						if err := tcattach.DetachAll(filepath.Join(pin, "links"), FilterPrefix); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
				})
			})
			b.Run("held", func(b *testing.B) {
				p.Do(b, p.Node, func() {
					dp.Attach(p.Index)
					for b.Loop() {
						attach(b, false)
					}
				})
			})
			b.Run("reattach", func(b *testing.B) {
				p.Do(b, p.Node, func() {
					hs := dp.hooks(p.Index)
					for b.Loop() {
						for i, prog := range dp.progs() {
							a, err := tcattach.Attach(m, hs[i], prog)
							if err != nil {
								b.Fatal(err)
							}
							a.Close()
						}
					}
				})
			})
		})
	}
}
