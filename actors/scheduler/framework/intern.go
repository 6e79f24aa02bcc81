package framework

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// interner numbers (namespace, label, value) triples so that node label indexes are keyed
// by small integers: hashing three strings per node per cycle was the scheduler's hot spot.
// Numbers are never reused, so a snapshot can read them while the cache adds more.
type interner struct {
	mu     sync.RWMutex
	ids    map[labelKey]uint32
	owners map[types.UID]uint32 // controller owners, for spreading replicas: numbered likewise
}

type labelKey struct{ ns, key, value string }

func newInterner() *interner {
	return &interner{ids: map[labelKey]uint32{}, owners: map[types.UID]uint32{}}
}

// owner returns the number of a controller owner ("": 0), adding it when new.
func (in *interner) owner(uid types.UID) uint32 {
	if uid == "" {
		return 0
	}
	if id, ok := in.lookupOwner(uid); ok {
		return id
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	id, ok := in.owners[uid]
	if !ok {
		id = uint32(len(in.owners) + 1)
		in.owners[uid] = id
	}
	return id
}

// lookupOwner returns the number of a controller owner; false means no counted pod ever had it.
func (in *interner) lookupOwner(uid types.UID) (uint32, bool) {
	in.mu.RLock()
	defer in.mu.RUnlock()
	id, ok := in.owners[uid]
	return id, ok
}

// podLabels returns the numbers of a pod's labels, adding the ones not seen before.
func (in *interner) podLabels(p *v1.Pod) []uint32 {
	if len(p.Labels) == 0 {
		return nil
	}
	out := make([]uint32, 0, len(p.Labels))
	in.mu.Lock()
	defer in.mu.Unlock()
	for k, v := range p.Labels {
		lk := labelKey{p.Namespace, k, v}
		id, ok := in.ids[lk]
		if !ok {
			id = uint32(len(in.ids) + 1)
			in.ids[lk] = id
		}
		out = append(out, id)
	}
	return out
}

// lookup returns the number of a triple; false means no counted pod ever carried it.
func (in *interner) lookup(k labelKey) (uint32, bool) {
	in.mu.RLock()
	defer in.mu.RUnlock()
	id, ok := in.ids[k]
	return id, ok
}
