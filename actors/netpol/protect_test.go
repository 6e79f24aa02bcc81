package netpol

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/skiff-sh/skiff/bpf/policy"
	"github.com/skiff-sh/skiff/bpf/tcattach"
	"github.com/skiff-sh/skiff/testkit/bpffstest"
	"github.com/skiff-sh/skiff/testkit/vethns"
)

// TestProtectAttachesOrFails: Protect finds the host side of a pod's eth0 and returns once the
// programs are on it, in both modes; where they cannot go (another tc filter holds the
// priority, on a kernel without tcx) it returns an error for the sandbox and counts it.
func TestProtectAttachesOrFails(t *testing.T) {
	for _, m := range []tcattach.Mode{tcattach.TCX, tcattach.Legacy} {
		t.Run(string(m), func(t *testing.T) {
			pin := filepath.Join(bpffstest.Mount(t), "node")
			dp, err := policy.LoadMode(pin, m)
			if err != nil {
				t.Fatal(err)
			}
			defer dp.Remove()
			e := &Enforcer{cfg: Config{Logger: slog.Default()}}
			e.loaded(dp, nil)
			if e.Stats().Mode != string(m) {
				t.Fatalf("mode %q, want %s", e.Stats().Mode, m)
			}
			p := vethns.New(t)
			p.Do(t, p.Node, func() {
				if err := e.Protect(context.Background(), "/run/netns/"+p.Pod); err != nil {
					t.Fatal(err)
				}
				for _, egress := range []bool{false, true} {
					tcx, tc, err := tcattach.Programs(p.Index, egress)
					if err != nil || len(tcx)+len(tc) != 1 {
						t.Fatalf("egress %v after Protect: tcx %v, tc %v (%v)", egress, tcx, tc, err)
					}
				}
			})
			if m != tcattach.Legacy {
				return
			}
			q := vethns.New(t)
			q.Do(t, q.Node, func() {
				prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
					Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
				if err != nil {
					t.Fatal(err)
				}
				defer prog.Close()
				if _, err := tcattach.Attach(tcattach.Legacy, tcattach.Hook{Ifindex: q.Index, Name: "another", Priority: 2}, prog); err != nil {
					t.Fatal(err)
				}
				err = e.Protect(context.Background(), "/run/netns/"+q.Pod)
				if err == nil || !strings.Contains(err.Error(), "NetworkPolicy enforcement") || !strings.Contains(err.Error(), "taken") {
					t.Fatalf("Protect with the priority taken: %v, want a NetworkPolicy enforcement error", err)
				}
			})
			if e.Stats().AttachFailures != 1 {
				t.Fatalf("attach failures %d, want 1", e.Stats().AttachFailures)
			}
		})
	}
}
