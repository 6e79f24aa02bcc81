package framework

import (
	"bytes"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// BenchmarkSchedule5000Nodes measures scheduling decisions (Snapshot, Schedule, Assume) on
// the benchmark cluster; pods/s is the number to watch.
func BenchmarkSchedule5000Nodes(b *testing.B) {
	c := benchCluster()
	pods := make([]*v1.Pod, b.N)
	for i := range pods {
		pods[i] = benchPod(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := benchScheduleOne(c, pods[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pods/s")
}

func TestRunBench(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("a measurement, not a correctness test: skipped in -short and -race runs")
	}
	var buf bytes.Buffer
	if err := RunBench(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "pods/s") {
		t.Fatalf("want one table row with pods/s, got %q", out)
	}
	t.Log(out)
}
