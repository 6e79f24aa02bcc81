package spanstore

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A fixed rollout: the apiserver's create, the deployment controller reacting 40ms later, its
// ReplicaSet create; plus a span whose parent was never recorded.
func fixedTrace() []Span {
	ctl := []string{AttrController, "deployment-controller"}
	return []Span{
		span("t", "root", "", "create deployments", 0, 10),
		span("t", "rec", "root", "reconcile deployment-controller", 50, 90, ctl...),
		span("t", "rs", "rec", "create replicasets", 52, 60),
		span("t", "rs2", "rec", "update deployments/status", 80, 85),
		span("t", "lost", "elsewhere", "sync pod", 95, 100),
	}
}

func TestWaterfallTreeAndGaps(t *testing.T) {
	lines := Waterfall(fixedTrace())
	type row struct {
		depth int
		op    string
		gap   bool
	}
	want := []row{
		{0, "create deployments", false},
		{1, "gap 50.0ms", true}, // the parent's start to the controller's reconcile
		{1, "reconcile deployment-controller", false},
		// 2ms before the ReplicaSet create is under 1/20 of the trace: no gap line.
		{2, "create replicasets", false},
		{2, "gap 20.0ms", true},
		{2, "update deployments/status", false},
		{0, MissingParent, false},
		{1, "sync pod", false},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d: %+v", len(lines), len(want), lines)
	}
	for i, w := range want {
		l := lines[i]
		if l.Depth != w.depth || l.Operation != w.op || l.Gap != w.gap {
			t.Errorf("line %d = depth %d %q gap=%v, want depth %d %q gap=%v", i, l.Depth, l.Operation, l.Gap, w.depth, w.op, w.gap)
		}
		if l.Offset < 0 || l.Duration < 0 {
			t.Errorf("line %d has a negative offset or duration: %+v", i, l)
		}
	}
	if lines[2].Component != "deployment-controller" || lines[3].Component != "apiserver" {
		t.Errorf("components: %q, %q", lines[2].Component, lines[3].Component)
	}
	if lines[2].Offset != 50*time.Millisecond || lines[2].Duration != 40*time.Millisecond {
		t.Errorf("reconcile at +%v for %v, want +50ms for 40ms", lines[2].Offset, lines[2].Duration)
	}
}

func TestRenderDrawsIndentedRowsAndScaledBars(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, fixedTrace(), 20); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(rows) != 9 {
		t.Fatalf("want a header and 8 rows:\n%s", b.String())
	}
	if !strings.HasPrefix(rows[0], "COMPONENT") || !strings.Contains(rows[0], "100.0ms") {
		t.Errorf("header names the columns and the trace's width: %q", rows[0])
	}
	bars := func(r string) string { return r[strings.Index(r, "|")+1 : strings.LastIndex(r, "|")] }
	// Indentation grows with depth, in the operation column.
	col := strings.Index(rows[0], "OPERATION")
	for i, want := range map[int]string{1: "create deployments", 3: "  reconcile deployment-controller", 4: "    create replicasets", 8: "  sync pod"} {
		if !strings.HasPrefix(rows[i][col:], want+" ") {
			t.Errorf("row %d: operation column %q, want it to start with %q", i, rows[i][col:], want)
		}
	}
	// The root spans the first tenth of the bar; the gap line is dotted, not solid.
	if got := []rune(bars(rows[1])); len(got) != 20 || got[0] != '█' || got[2] != ' ' {
		t.Errorf("root bar %q", string(got))
	}
	if got := bars(rows[2]); !strings.Contains(got, "·") || strings.Contains(got, "█") || !strings.Contains(rows[2], "gap 50.0ms") {
		t.Errorf("gap row %q", rows[2])
	}
	if !strings.Contains(rows[3], "deployment-controller") || !strings.Contains(rows[3], "+50.0ms") || !strings.Contains(rows[3], "40.0ms") {
		t.Errorf("reconcile row %q", rows[3])
	}
	if !strings.Contains(b.String(), MissingParent) {
		t.Errorf("no line for the unrecorded parent:\n%s", b.String())
	}
	t.Log("\n" + b.String())
}
