package spanstore

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A rollout's chain: the pod waited longest for the scheduler, and the path ends at the
// kubelet's status write, not at a side branch.
func TestCriticalPathNamesTheLongestWait(t *testing.T) {
	spans := []Span{
		span("t", "apply", "", RootApply, 0, 10),
		span("t", "create", "apply", "create deployments", 2, 8),
		span("t", "rec", "create", "reconcile deployment-controller", 20, 30),
		span("t", "pods", "rec", "create pods", 22, 28),
		span("t", "event", "rec", "create events", 28, 29), // a side branch
		span("t", "sched", "pods", "schedule pod", 900, 910),
		span("t", "bind", "sched", "create pods/binding", 902, 908),
		span("t", "sync", "bind", "sync pod", 950, 1200),
		span("t", "status", "sync", "update pods/status", 1190, 1195),
	}
	steps := CriticalPath(spans)
	var names []string
	for _, s := range steps {
		names = append(names, s.Span.Name)
	}
	want := []string{RootApply, "create deployments", "reconcile deployment-controller", "create pods", "schedule pod", "create pods/binding", "sync pod"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("critical path %v, want %v", names, want)
	}
	if got := steps[4].Wait; got != 872*time.Millisecond { // create pods started at 22
		t.Fatalf("wait before schedule pod = %v, want 872ms", got)
	}
	var out bytes.Buffer
	if err := RenderCriticalPath(&out, spans); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `longest wait: 872.0ms before apiserver "schedule pod" (after apiserver "create pods")`) {
		t.Fatalf("render does not name the longest wait:\n%s", out.String())
	}
}

func TestCriticalPathSurvivesAParentCycle(t *testing.T) {
	spans := []Span{span("t", "a", "b", "x", 0, 5), span("t", "b", "a", "y", 1, 6)}
	if got := len(CriticalPath(spans)); got != 2 {
		t.Fatalf("%d steps through a two-span cycle", got)
	}
}
