package lb

import (
	"errors"

	"github.com/cilium/ebpf"
)

// Sweep deletes the entries of m that keep turns down: what an update stopped half way left in
// pinned maps. It reads the whole map before deleting, since a map must not change under its
// iterator.
func Sweep[K, V any](m *ebpf.Map, keep func(K, V) bool) error {
	var stale []K
	var k K
	var v V
	it := m.Iterate()
	for it.Next(&k, &v) {
		if !keep(k, v) {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	var errs []error
	for i := range stale {
		if err := m.Delete(&stale[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
