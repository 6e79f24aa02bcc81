package informer

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// labelSets interns the label maps of an informer's objects: the objects of one workload carry
// the same labels, and one shared map keeps what walks all of them (a ReplicaSet's claim
// matches its selector against each of its 30,000 pods, twice a second while it grows) in
// the CPU's cache instead of a cache miss per pod, and is stored once. Cached objects are
// read-only (CheckMutations), so they may share it.
type labelSets struct {
	mu   sync.Mutex
	sets map[string]map[string]string // by labelKey
	key  []byte                       // labelKey's buffer, under mu
}

// maxLabelSets bounds the table; once full it starts over (the sets in use come back at
// once), so objects with labels of their own (a StatefulSet's pod names) only churn it.
const maxLabelSets = 4096

// intern gives obj the shared map equal to its labels, or makes its map the shared one.
func (s *labelSets) intern(obj runtime.Object) {
	m, err := meta.Accessor(obj)
	if err != nil || len(m.GetLabels()) == 0 {
		return
	}
	labels := m.GetLabels()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = appendLabelKey(s.key[:0], labels)
	if shared, ok := s.sets[string(s.key)]; ok {
		m.SetLabels(shared)
		return
	}
	if s.sets == nil || len(s.sets) >= maxLabelSets {
		s.sets = make(map[string]map[string]string, maxLabelSets)
	}
	s.sets[string(s.key)] = labels
}

// appendLabelKey appends labels in key order, each key and value ended by a NUL (which
// neither may contain), so that equal sets and only they have equal keys.
func appendLabelKey(b []byte, labels map[string]string) []byte {
	var small [8]string
	keys := small[:0]
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = append(append(b, k...), 0)
		b = append(append(b, labels[k]...), 0)
	}
	return b
}
