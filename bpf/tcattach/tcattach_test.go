package tcattach

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/skiff-sh/skiff/testkit/bpffstest"
	"github.com/skiff-sh/skiff/testkit/vethns"
)

func classifier(t *testing.T) *ebpf.Program {
	t.Helper()
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func progID(t *testing.T, p *ebpf.Program) ebpf.ProgramID {
	t.Helper()
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	return id
}

func attached(t *testing.T, ifindex int, egress bool) (tcx, tc []ebpf.ProgramID) {
	t.Helper()
	tcx, tc, err := Programs(ifindex, egress)
	if err != nil {
		t.Fatal(err)
	}
	return tcx, tc
}

func TestDetect(t *testing.T) {
	bpffstest.Mount(t) // root
	m, err := Detect()
	if err != nil || (m != TCX && m != Legacy) {
		t.Fatalf("Detect: %q, %v", m, err)
	}
	t.Logf("this kernel: %s", m)
}

// TestAttachReplaceDetach, in both modes: a pinned attach, a second one (a restarted agent's
// new program) that replaces it, a switch to the other mode that leaves only the new mode's
// attachment, and a Detach that leaves nothing, not even the clsact qdisc.
func TestAttachReplaceDetach(t *testing.T) {
	for _, m := range []Mode{TCX, Legacy} {
		t.Run(string(m), func(t *testing.T) {
			pins := bpffstest.Mount(t)
			p := vethns.New(t)
			other := map[Mode]Mode{TCX: Legacy, Legacy: TCX}[m]
			h := Hook{Ifindex: p.Index, Egress: true, Pin: filepath.Join(pins, "veth-out"), Name: "skiff-test", Priority: 7}
			want := func(mode Mode, prog *ebpf.Program) {
				t.Helper()
				tcx, tc := attached(t, p.Index, true)
				id := progID(t, prog)
				ok := (mode == TCX && len(tc) == 0 && len(tcx) == 1 && tcx[0] == id) ||
					(mode == Legacy && len(tcx) == 0 && len(tc) == 1 && tc[0] == id)
				if !ok {
					t.Fatalf("%s attach of program %d: tcx %v, tc filters %v", mode, id, tcx, tc)
				}
				if in1, in2 := attached(t, p.Index, false); len(in1)+len(in2) != 0 {
					t.Fatalf("ingress has programs: %v %v", in1, in2)
				}
			}
			p.Do(t, p.Node, func() {
				first, second := classifier(t), classifier(t)
				a, err := Attach(m, h, first)
				if err != nil {
					t.Fatal(err)
				}
				a.Close()
				want(m, first)
				a, err = Attach(m, h, second)
				if err != nil {
					t.Fatal(err)
				}
				a.Close()
				want(m, second)
				if a, err = Attach(other, h, first); err != nil {
					t.Fatal(err)
				}
				want(other, first)
				if err := a.Detach(); err != nil {
					t.Fatal(err)
				}
				if tcx, tc := attached(t, p.Index, true); len(tcx)+len(tc) != 0 {
					t.Fatalf("after Detach: tcx %v, tc %v", tcx, tc)
				}
				if _, err := os.Stat(h.Pin); !os.IsNotExist(err) {
					t.Fatalf("pin after Detach: %v", err)
				}
				if f, err := FindFilters("skiff-"); err != nil || len(f) != 0 {
					t.Fatalf("filters left: %v %v", f, err)
				}
			})
			if out := qdiscs(t, p); out != "" {
				t.Fatalf("clsact left after Detach: %s", out)
			}
		})
	}
}

// TestLegacyLeavesOthersFilters: a filter of another name at the hook's priority is refused,
// not replaced; RemoveFilters removes only the prefix's and keeps the qdisc the other needs.
func TestLegacyLeavesOthersFilters(t *testing.T) {
	bpffstest.Mount(t)
	p := vethns.New(t)
	p.Do(t, p.Node, func() {
		prog := classifier(t)
		theirs := Hook{Ifindex: p.Index, Name: "someone-else", Priority: 3}
		if _, err := Attach(Legacy, theirs, prog); err != nil {
			t.Fatal(err)
		}
		if _, err := Attach(Legacy, Hook{Ifindex: p.Index, Name: "skiff-x", Priority: 3}, prog); err == nil {
			t.Fatal("attach over another's filter succeeded")
		}
		if _, err := Attach(Legacy, Hook{Ifindex: p.Index, Name: "skiff-x", Priority: 4}, prog); err != nil {
			t.Fatal(err)
		}
		if err := RemoveFilters("skiff-"); err != nil {
			t.Fatal(err)
		}
		fs, err := Filters(p.Index, false)
		if err != nil || len(fs) != 1 || fs[0].Name != "someone-else" {
			t.Fatalf("filters after RemoveFilters: %+v %v", fs, err)
		}
	})
}

func qdiscs(t *testing.T, p *vethns.Pair) string {
	t.Helper()
	out, err := execOut("ip", "netns", "exec", p.Node, "tc", "qdisc", "show", "dev", p.HostIf, "clsact")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func execOut(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestHoldsAndDropStale, in both modes: Holds is true only for the program an Attach in that
// mode put at the hook; DropStale keeps the pin of a link on its interface and drops it once
// the interface is deleted (the kernel detached the link; only the pin held it).
func TestHoldsAndDropStale(t *testing.T) {
	for _, m := range []Mode{TCX, Legacy} {
		t.Run(string(m), func(t *testing.T) {
			pins := bpffstest.Mount(t)
			p := vethns.New(t)
			other := map[Mode]Mode{TCX: Legacy, Legacy: TCX}[m]
			h := Hook{Ifindex: p.Index, Pin: filepath.Join(pins, "veth-in"), Name: "skiff-test", Priority: 7}
			holds := func(step string, m Mode, prog *ebpf.Program, want bool) {
				t.Helper()
				id, err := ProgramID(prog)
				if err != nil {
					t.Fatal(err)
				}
				if got, err := Holds(m, h, id); err != nil || got != want {
					t.Fatalf("%s: Holds(%s) %v (%v), want %v", step, m, got, err, want)
				}
			}
			pinned := func(step string, want bool) {
				t.Helper()
				if _, err := os.Stat(h.Pin); (err == nil) != want {
					t.Fatalf("%s: pin %v, want it there %v", step, err, want)
				}
			}
			first, second := classifier(t), classifier(t)
			p.Do(t, p.Node, func() {
				holds("nothing attached", m, first, false)
				a, err := Attach(m, h, first)
				if err != nil {
					t.Fatal(err)
				}
				a.Close()
				holds("attached", m, first, true)
				holds("another program", m, second, false)
				holds("the other mode", other, first, false)
				if err := DropStale(h); err != nil {
					t.Fatal(err)
				}
				pinned("interface there", m == TCX)
				holds("after DropStale", m, first, true)
			})
			p.Delete(t)
			p.Do(t, p.Node, func() {
				holds("interface deleted", m, first, false)
				pinned("interface deleted", m == TCX)
				if err := DropStale(h); err != nil {
					t.Fatal(err)
				}
				pinned("dropped", false)
			})
		})
	}
}
