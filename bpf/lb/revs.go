package lb

// revAlloc hands out slot generations. A Service holds exactly one (two for
// the instant of a switch), so generations are reused from a free list and
// never exceed live Services + concurrent switches; slots are keyed by
// (generation, index), so there is nothing to fragment.
type revAlloc struct {
	next uint32 // 0 is never handed out
	free []uint32
}

func (a *revAlloc) get() uint32 {
	if n := len(a.free); n > 0 {
		r := a.free[n-1]
		a.free = a.free[:n-1]
		return r
	}
	a.next++
	return a.next
}

func (a *revAlloc) put(r uint32) { a.free = append(a.free, r) }

// highWater is the largest generation ever handed out.
func (a *revAlloc) highWater() uint32 { return a.next }
