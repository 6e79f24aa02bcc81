package rpc

import "time"

// workers runs requests on goroutines it reuses. An apiserver request grows its goroutine's
// stack to tens of KB (middleware, decoders, the field manager), and a fresh goroutine per
// request copied its stack up from the initial few KB every time: ~5% of the apiserver's CPU
// at 500 Lease renewals a second. Concurrency stays unbounded, as with a goroutine per
// request: a request that finds no idle goroutine gets a new one, and a goroutine waits at
// most idleWorker for its next request before it ends.
type workers struct{ work chan func() }

const idleWorker = 5 * time.Second

func newWorkers() *workers { return &workers{work: make(chan func())} }

func (w *workers) run(f func()) {
	select {
	case w.work <- f:
	default:
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	idle := time.NewTimer(idleWorker)
	defer idle.Stop()
	for {
		f()
		idle.Reset(idleWorker)
		select {
		case f = <-w.work:
		case <-idle.C:
			return
		}
	}
}
