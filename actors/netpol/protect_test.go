package netpol

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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
	inEachMode(t, func(t *testing.T, m tcattach.Mode, _ string, dp *policy.Dataplane) {
		e := &Enforcer{cfg: Config{Logger: slog.Default()}}
		e.publish(dp)
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

// TestProtectWaitsForTheDataplane: a sandbox that comes before the dataplane waits for it and
// attaches the moment it is published, not at a poll's next tick; one that comes after an
// incarnation stopped waits for the next one's; with none it fails after dataplaneWait, the
// load's error in its message. synctest's clock makes those instants exact.
func TestProtectWaitsForTheDataplane(t *testing.T) {
	m, err := tcattach.Detect()
	if err != nil {
		t.Fatal(err)
	}
	pin := bpffstest.PinDir(t)
	first, err := policy.LoadMode(pin, m)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := policy.LoadMode(pin, m)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Remove()
	p := vethns.New(t)
	protect := func(t *testing.T, e *Enforcer, want time.Duration) error {
		t.Helper()
		var err error
		p.Do(t, p.Node, func() {
			start := time.Now()
			err = e.Protect(context.Background(), "/run/netns/"+p.Pod)
			if took := time.Since(start); took != want {
				t.Errorf("Protect returned after %v, want %v", took, want)
			}
		})
		return err
	}
	const up = 1234 * time.Millisecond // not a multiple of any poll interval
	synctest.Test(t, func(t *testing.T) {
		e := &Enforcer{cfg: Config{Logger: slog.Default()}}
		go func() {
			time.Sleep(up)
			e.publish(first)
		}()
		if err := protect(t, e, up); err != nil {
			t.Fatal(err)
		}
		// The incarnation stops: its dataplane is withdrawn, then closed; the next one comes.
		e.mu.Lock()
		e.unpublishLocked(first)
		e.mu.Unlock()
		first.Close()
		go func() {
			time.Sleep(up)
			e.publish(second)
		}()
		if err := protect(t, e, up); err != nil {
			t.Fatal(err)
		}
		if got := e.Stats().Attached; got != 2 {
			t.Fatalf("attached %d times, want 2 (each dataplane's programs once)", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		e := &Enforcer{cfg: Config{Logger: slog.Default()}, loadErr: errors.New("no bpffs here")}
		err := protect(t, e, dataplaneWait)
		if err == nil || !strings.Contains(err.Error(), "not loaded") || !strings.Contains(err.Error(), "no bpffs here") {
			t.Fatalf("Protect without a dataplane: %v, want it not loaded, with the load's error", err)
		}
	})
}
