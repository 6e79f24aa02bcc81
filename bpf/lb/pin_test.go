package lb

import (
	"errors"
	"os"
	"testing"

	"github.com/cilium/ebpf/link"

	"github.com/skiff-sh/skiff/testkit/bpffstest"
)

func attachedCount(t *testing.T, cgroup string) int {
	t.Helper()
	cg, err := os.Open(cgroup)
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	n := 0
	for _, h := range (&Dataplane{}).hooks() {
		q, err := link.QueryPrograms(link.QueryOptions{Target: int(cg.Fd()), Attach: h.at})
		if err != nil {
			t.Fatalf("query %v: %v", h.at, err)
		}
		n += len(q.Programs)
	}
	return n
}

// A pinned Dataplane keeps serving after Close, is adopted by the next Load
// (same Services, nothing rewritten, hooks switched in place), sweeps slots
// a crash left behind, and Remove takes everything out of the kernel.
func TestPinnedSurvivesReload(t *testing.T) {
	needRoot(t)
	pin := bpffstest.PinDir(t)
	dp1, err := Load(Options{PinPath: pin})
	if err != nil {
		t.Skipf("kernel cannot load the socket LB programs: %v", err)
	}
	child := cgroupChild(t)
	if err := dp1.Attach(child); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dp: dp1, cgroup: child}
	e.startClient()
	bes, names := tcpBackends(t, 2)
	k := ServiceKey{VIP: vip, Port: 80, Proto: TCP}
	spec := ServiceSpec{Backends: bes}
	mustUpsert(t, dp1, k, spec)
	before, err := dp1.Dump()
	if err != nil {
		t.Fatal(err)
	}
	if err := dp1.Close(); err != nil {
		t.Fatal(err)
	}
	// Nothing in this process holds the programs now: the pins do.
	if n := attachedCount(t, child); n != 8 {
		t.Fatalf("%d programs attached after Close of a pinned Dataplane, want 8", n)
	}
	counts := e.must(request{Op: "tcpn", Addr: "10.96.0.10:80", N: 50}).Counts
	if counts[names[0]]+counts[names[1]] != 50 {
		t.Fatalf("after Close: %v", counts)
	}

	dp2, err := Load(Options{PinPath: pin})
	if err != nil {
		t.Fatal(err)
	}
	after, err := dp2.Dump()
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 1 || after[0].Rev != before[0].Rev || len(after[0].Backends) != 2 {
		t.Fatalf("adopted %+v, had %+v", after, before)
	}
	if st := mustUpsert(t, dp2, k, spec); st != (Stats{}) {
		t.Fatalf("re-upserting the adopted spec wrote %+v", st)
	}
	if err := dp2.Attach(child); err != nil {
		t.Fatal(err)
	}
	if n := attachedCount(t, child); n != 8 {
		t.Fatalf("%d programs attached after re-Attach, want 8 (links replaced, not added)", n)
	}
	mustUpsert(t, dp2, k, ServiceSpec{Backends: bes[1:]})
	counts = e.must(request{Op: "tcpn", Addr: "10.96.0.10:80", N: 50}).Counts
	if counts[names[1]] != 50 {
		t.Fatalf("after re-Load and change: %v", counts)
	}

	// Leave a slot of a generation no Service uses, as a crash mid-Upsert would.
	junk := sockLbSlotKey{Rev: 999, Idx: 0}
	if err := dp2.objs.Backends.Put(&junk, bes[0].raw()); err != nil {
		t.Fatal(err)
	}
	if err := dp2.Close(); err != nil {
		t.Fatal(err)
	}
	dp3, err := Load(Options{PinPath: pin})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := mapLen(dp3.objs.Backends); err != nil || n != 1 {
		t.Fatalf("backend slots after adopting: %d (%v), want 1", n, err)
	}
	if n, err := mapLen(dp3.objs.Members); err != nil || n != 1 {
		t.Fatalf("members after adopting: %d (%v), want 1", n, err)
	}
	ds, _ := DumpPinned(pin)
	if len(ds) != 1 || len(ds[0].Backends) != 1 || ds[0].Backends[0] != bes[1] {
		t.Fatalf("DumpPinned = %+v", ds)
	}
	if err := dp3.Attach(child); err != nil {
		t.Fatal(err)
	}
	if err := dp3.Remove(); err != nil {
		t.Fatal(err)
	}
	if n := attachedCount(t, child); n != 0 {
		t.Fatalf("%d programs attached after Remove", n)
	}
	if _, err := os.Stat(pin); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pin path after Remove: %v", err)
	}
}

func TestPinPathMustBeBPFFS(t *testing.T) {
	needRoot(t)
	if _, err := Load(Options{PinPath: t.TempDir()}); err == nil {
		t.Fatal("Load accepted a pin path outside bpffs")
	}
}
