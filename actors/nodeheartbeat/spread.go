package nodeheartbeat

import (
	"container/heap"
	"context"
	"time"
)

// Spread hands names to out, the queue of a bounded pool of workers that beat them. First every
// name once, as fast as the workers take them (registration); each name is then handed out
// once per interval at its own phase, the phases evenly spaced (name i at i/N of the interval),
// so N nodes cost N/interval heartbeats a second with no burst. A renewal that is due goes
// before the remaining registrations, and a name's first renewal comes within one interval of
// its registration, so a slow registration of many nodes lets no early lease expire. A send
// blocks while every worker is busy: the schedule then runs late and catches up without
// skipping a node. Spread returns when ctx ends.
func Spread(ctx context.Context, names []string, interval time.Duration, out chan<- string) {
	n := time.Duration(len(names))
	start := time.Now()
	var due dueHeap
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for registered := 0; ; {
		// Within a millisecond of due is due: not worth a timer.
		if len(due) > 0 && time.Until(due[0].at) <= time.Millisecond {
			name := due[0].name
			due[0].at = due[0].at.Add(interval)
			heap.Fix(&due, 0)
			select {
			case out <- names[name]:
			case <-ctx.Done():
				return
			}
			continue
		}
		var register chan<- string // nil (never ready) once all are registered
		if registered < len(names) {
			register = out
		} else if len(due) == 0 {
			return // no names
		}
		var renew <-chan time.Time // a renewal coming due ends the wait for a worker to register
		if len(due) > 0 {
			timer.Reset(time.Until(due[0].at))
			renew = timer.C
		}
		var name string
		if registered < len(names) {
			name = names[registered]
		}
		select {
		case register <- name:
			phase := start.Add(interval * time.Duration(registered) / n)
			if late := time.Since(phase); late >= 0 {
				phase = phase.Add((late/interval + 1) * interval) // the first of its phases after now
			}
			heap.Push(&due, beat{at: phase, name: registered})
			registered++
		case <-renew:
		case <-ctx.Done():
			return
		}
	}
}

type beat struct {
	at   time.Time
	name int // index in names
}

// dueHeap orders beats by when they are due.
type dueHeap []beat

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(beat)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
