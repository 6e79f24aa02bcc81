package netpol

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/bpf/policy"
	"github.com/skiff-sh/skiff/bpf/tcattach"
	"github.com/skiff-sh/skiff/testkit/bpffstest"
	"github.com/skiff-sh/skiff/testkit/testutil"
	"github.com/skiff-sh/skiff/testkit/vethns"
)

// TestEachVethAttachedOnce, in both modes: the veth on the bridge when the watcher starts is
// attached by it before the dataplane is published; a pod veth enslaved afterwards is left to
// its sandbox's Protect (the watcher sees it and attaches nothing), which attaches once; a
// retried Protect finds the programs on and attaches nothing; a deleted veth's pins go.
func TestEachVethAttachedOnce(t *testing.T) {
	inEachMode(t, func(t *testing.T, m tcattach.Mode, pin string, dp *policy.Dataplane) {
		const br = "skt-br0"
		old := vethns.New(t)
		old.Enslave(t, br)
		e := &Enforcer{cfg: Config{Bridge: br, Logger: slog.Default()}}
		ctx, cancel := context.WithCancel(context.Background())
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			old.Do(t, old.Node, func() { e.watchLinks(ctx, dp) })
		}()
		defer func() { cancel(); <-watched }()
		if _, err := e.dataplane(ctx, time.After(time.Minute)); err != nil {
			t.Fatal(err)
		}
		attached := func(step string, want int) {
			t.Helper()
			if got := e.Stats().Attached; got != want {
				t.Fatalf("%s: %d attaches, want %d", step, got, want)
			}
		}
		attached("published", 1)
		programs(t, old, 1)

		pod := old.Another(t)
		pod.Enslave(t, br)
		// The watcher handles events in order: once it saw old's veth go, it has seen pod's
		// enslaved too.
		old.Delete(t)
		testutil.Eventually(t, 30*time.Second, 10*time.Millisecond, func() error {
			if n := e.Stats().VethsGone; n != 1 {
				return fmt.Errorf("%d veth deletions seen, want 1", n)
			}
			return nil
		})
		attached("the new veth seen by the watcher", 1)
		programs(t, pod, 0)
		for i := range 2 {
			pod.Do(t, pod.Node, func() {
				if err := e.Protect(context.Background(), "/run/netns/"+pod.Pod); err != nil {
					t.Fatal(err)
				}
			})
			attached(fmt.Sprintf("Protect %d", i+1), 2)
			programs(t, pod, 1)
		}
		wantPins := map[tcattach.Mode][]string{tcattach.TCX: {fmt.Sprintf("%d-in", pod.Index), fmt.Sprintf("%d-out", pod.Index)}}[m]
		ents, err := os.ReadDir(filepath.Join(pin, "links"))
		if err != nil || len(ents) != len(wantPins) {
			t.Fatalf("pins %v (%v), want %v: the deleted veth's dropped", ents, err, wantPins)
		}
		for i, ent := range ents {
			if ent.Name() != wantPins[i] {
				t.Fatalf("pins %v, want %v", ents, wantPins)
			}
		}
	})
}

// programs checks that each side of p's node veth runs want programs.
func programs(t *testing.T, p *vethns.Pair, want int) {
	t.Helper()
	p.Do(t, p.Node, func() {
		for _, egress := range []bool{false, true} {
			tcx, tc, err := tcattach.Programs(p.Index, egress)
			if err != nil || len(tcx)+len(tc) != want {
				t.Fatalf("veth %s egress %v: tcx %v, tc %v (%v); want %d programs", p.HostIf, egress, tcx, tc, err, want)
			}
		}
	})
}

// inEachMode runs test on a policy dataplane pinned in a fresh bpffs, once per attach mode.
func inEachMode(t *testing.T, test func(t *testing.T, m tcattach.Mode, pin string, dp *policy.Dataplane)) {
	for _, m := range []tcattach.Mode{tcattach.TCX, tcattach.Legacy} {
		t.Run(string(m), func(t *testing.T) {
			pin := bpffstest.PinDir(t)
			dp, err := policy.LoadMode(pin, m)
			if err != nil {
				t.Fatal(err)
			}
			defer dp.Remove()
			test(t, m, pin, dp)
		})
	}
}
