package replicaset

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// The window of count-only syncs grows with the ReplicaSet, as the walk a sync makes does,
// between its bounds.
func TestCountBatchGrowsWithTheReplicaSet(t *testing.T) {
	for _, c := range []struct {
		pods int32
		want time.Duration
	}{{0, minCountBatch}, {20, minCountBatch}, {10000, 330 * time.Millisecond}, {30000, 990 * time.Millisecond}, {100000, maxCountBatch}} {
		rs := &appsv1.ReplicaSet{Status: appsv1.ReplicaSetStatus{Replicas: c.pods}}
		if got := countBatch(rs); got != c.want {
			t.Errorf("%d pods: window %v, want %v", c.pods, got, c.want)
		}
	}
}
