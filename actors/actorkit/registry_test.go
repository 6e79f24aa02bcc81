package actorkit

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// A system's process registry has one shard per bucket: 32 per bucket kept ~4 MB live in
// every process for locks that a PID's cached process makes idle.
func TestRegistryOneShardPerBucket(t *testing.T) {
	s := NewSystem()
	defer s.Shutdown()
	buckets := s.sys.ProcessRegistry.LocalPIDs.LocalPIDs
	if len(buckets) == 0 {
		t.Fatal("registry has no buckets")
	}
	for i, b := range buckets {
		if len(b) != 1 {
			t.Fatalf("bucket %d has %d shards, want 1", i, len(b))
		}
	}
	pid, err := s.Spawn("one", func() Actor { return actor.ReceiveFunc(func(actor.Context) {}) })
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.sys.ProcessRegistry.Get(pid); !ok {
		t.Fatalf("spawned %v is not in the registry", pid)
	}
}
