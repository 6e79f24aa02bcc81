package framework

import (
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

// BenchmarkSelectorSpreadScore scores the 500 nodes a cycle on the benchmark cluster scores
// (10 replicas of 50 owners on every node) for a replica of one of those owners.
func BenchmarkSelectorSpreadScore(b *testing.B) {
	s := benchCluster().Snapshot()
	cy, err := newCycle(s, benchPod(1), nil)
	if err != nil {
		b.Fatal(err)
	}
	nodes := s.NodeInfos()[:numFeasibleNodesToFind(s.NumNodes(), 0)]
	raw := make([]int64, len(nodes))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		selectorSpread{}.Score(cy, nodes, raw)
	}
}
