package lb

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cilium/ebpf"
)

// Dump reads every Service and its current backend slots from the kernel
// maps (not from the Go-side cache), sorted by key.
func (d *Dataplane) Dump() ([]ServiceDump, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosed
	}
	return dumpMaps(d.objs.Services, d.objs.Backends)
}

func dumpMaps(services, backends *ebpf.Map) ([]ServiceDump, error) {
	var out []ServiceDump
	var raw sockLbSvcKey
	var val sockLbSvcVal
	it := services.Iterate()
	for it.Next(&raw, &val) {
		sd := ServiceDump{
			Key:             keyFromRaw(raw),
			Rev:             val.Rev,
			AffinityTimeout: time.Duration(val.AffinitySec) * time.Second,
		}
		for i := range val.Count {
			var b sockLbBackend
			sk := sockLbSlotKey{Rev: val.Rev, Idx: i}
			if err := backends.Lookup(&sk, &b); err != nil {
				return nil, fmt.Errorf("lb: dump %v slot %d: %w", sd.Key, i, err)
			}
			sd.Backends = append(sd.Backends, backendFromRaw(b))
		}
		out = append(out, sd)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("lb: dump: %w", err)
	}
	slices.SortFunc(out, func(a, b ServiceDump) int {
		if c := a.Key.VIP.Compare(b.Key.VIP); c != 0 {
			return c
		}
		if a.Key.Port != b.Key.Port {
			return int(a.Key.Port) - int(b.Key.Port)
		}
		return int(a.Key.Proto) - int(b.Key.Proto)
	})
	return out, nil
}

// mapLen counts the entries of m (tests use it to check nothing leaks).
func mapLen(m *ebpf.Map) (int, error) {
	var n int
	var k, v []byte
	it := m.Iterate()
	for it.Next(&k, &v) {
		n++
	}
	if err := it.Err(); err != nil && !errors.Is(err, ebpf.ErrIterationAborted) {
		return n, err
	}
	return n, nil
}
