// Package queue is the scheduler's queue of pods waiting for a node, as kube-scheduler's
// scheduling queue has it: an active queue, per-pod backoff, and a pool of unschedulable pods
// that only a cluster event their rejecting plugins' hints accept, or a timeout, sends back.
// A cluster event costs the pods in the pool that a plugin interested in it rejected, never
// the number of pods in the cluster.
package queue

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/actors/scheduler/framework"
)

// Defaults, as kube-scheduler's (podInitialBackoffSeconds, podMaxBackoffSeconds,
// podMaxInUnschedulablePodsDuration).
const (
	DefaultInitialBackoff     = time.Second
	DefaultMaxBackoff         = 10 * time.Second
	DefaultMaxInUnschedulable = 5 * time.Minute
	// FlushInterval is how often the scheduler should call FlushLeftover.
	FlushInterval = 30 * time.Second
)

// Why pods entered a queue, besides cluster events (whose labels are ClusterEvent.Label).
const (
	EventPodAdd                 = "PodAdd"
	EventPodUpdate              = "PodUpdate"
	EventScheduleAttemptFailure = "ScheduleAttemptFailure"
	EventUnschedulableTimeout   = "UnschedulableTimeout"
)

// Options tune a Queue; the zero value is kube-scheduler's defaults on the real clock.
type Options struct {
	InitialBackoff, MaxBackoff time.Duration
	MaxInUnschedulable         time.Duration
	Clock                      clock.WithTicker
}

// Queue holds pending pods by key (namespace/name). Safe for concurrent use.
type Queue struct {
	q       workqueue.TypedRateLimitingInterface[string] // active, and backing off (delayed adds)
	limiter workqueue.TypedRateLimiter[string]
	clock   clock.Clock
	maxWait time.Duration

	mu   sync.Mutex
	pool map[string]*waiting
	// The pool indexed by rejecting plugin (bit i of a PluginSet), and the pods no plugin
	// rejected (there were no nodes), which every event may help.
	byPlugin [32]map[string]*waiting
	anyEvent map[string]*waiting
	// Pods in a scheduling cycle, with the event sequence when their cycle began: the events
	// since then were not in their snapshot, so they are kept to judge a failure by.
	inFlight map[string]uint64
	changed  map[string]bool // in-flight pods updated during their cycle
	events   []recorded
	seq      uint64
}

type waiting struct {
	key          string
	pod          *v1.Pod // the version that did not fit, for the hints
	rejected     framework.PluginSet
	since        time.Time
	backoffUntil time.Time
	seen         uint64 // the last event that ran its hints
}

type recorded struct {
	seq uint64
	ev  framework.ClusterEvent
}

// New returns an empty queue.
func New(o Options) *Queue {
	if o.InitialBackoff <= 0 {
		o.InitialBackoff = DefaultInitialBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.MaxInUnschedulable <= 0 {
		o.MaxInUnschedulable = DefaultMaxInUnschedulable
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](o.InitialBackoff, o.MaxBackoff)
	q := &Queue{
		q:        workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Clock: o.Clock}),
		limiter:  limiter,
		clock:    o.Clock,
		maxWait:  o.MaxInUnschedulable,
		pool:     map[string]*waiting{},
		anyEvent: map[string]*waiting{},
		inFlight: map[string]uint64{},
		changed:  map[string]bool{},
	}
	setPending(0)
	return q
}

// Add queues a new pending pod now.
func (q *Queue) Add(key string) {
	q.mu.Lock()
	q.removeLocked(key)
	q.mu.Unlock()
	q.q.Add(key)
	countIncoming(active, EventPodAdd)
}

// Updated tells the queue a pending pod changed (not just its status): waiting in the pool it
// goes back (after its backoff); in a cycle, a failure of that cycle does not send it to the
// pool. Queued or backing off, it is tried in its latest version anyway.
func (q *Queue) Updated(key string) {
	q.mu.Lock()
	if _, ok := q.inFlight[key]; ok {
		q.changed[key] = true
	}
	w := q.removeLocked(key)
	q.mu.Unlock()
	if w != nil {
		q.requeue(w, EventPodUpdate)
	}
}

// Remove drops a pod that no longer waits (deleted, or bound by someone else) from the pool.
func (q *Queue) Remove(key string) {
	q.mu.Lock()
	q.removeLocked(key)
	q.mu.Unlock()
}

// Get blocks for the next pod to schedule; quit once the queue is shut down. Its cycle ends
// with Unschedulable, Failed, Assumed (then Finished or Failed) or Finished.
func (q *Queue) Get() (key string, quit bool) {
	key, quit = q.q.Get()
	if quit {
		return "", true
	}
	q.mu.Lock()
	q.removeLocked(key)
	q.inFlight[key] = q.seq
	q.mu.Unlock()
	return key, false
}

// Unschedulable ends a cycle in which no node fitted pod: it waits in the pool for an event
// the rejecting plugins' hints accept, unless one came during the cycle.
func (q *Queue) Unschedulable(key string, pod *v1.Pod, rejected framework.PluginSet) {
	now := q.clock.Now()
	w := &waiting{key: key, pod: pod, rejected: rejected, since: now, backoffUntil: now.Add(q.limiter.When(key))}
	q.mu.Lock()
	why := ""
	if q.changed[key] {
		why = EventPodUpdate
	} else {
		from := q.inFlight[key]
		for i := range q.events {
			if r := &q.events[i]; r.seq > from && rejected.WorthRequeuing(pod, &r.ev) {
				why = r.ev.Label()
				break
			}
		}
	}
	q.endCycleLocked(key)
	if why == "" {
		q.addLocked(w)
	}
	q.mu.Unlock()
	if why != "" {
		q.requeue(w, why)
	} else {
		countIncoming(unschedulable, EventScheduleAttemptFailure)
	}
	q.q.Done(key)
}

// Failed ends a cycle or a bind that erred: the pod is retried after its backoff.
func (q *Queue) Failed(key string) {
	q.endCycle(key)
	q.q.AddRateLimited(key)
	countIncoming(backoff, EventScheduleAttemptFailure)
	q.q.Done(key)
}

// Assumed ends the cycle of a pod whose bind is under way.
func (q *Queue) Assumed(key string) { q.endCycle(key) }

// Finished ends the work on a pod that was bound or needs none: its backoff is forgotten.
func (q *Queue) Finished(key string) {
	q.endCycle(key)
	q.q.Forget(key)
	q.q.Done(key)
}

// OnEvent runs the hints of the pods in the pool that a plugin interested in ev rejected,
// and sends back those that may fit now. It returns how many it sent.
func (q *Queue) OnEvent(ev *framework.ClusterEvent) int {
	q.mu.Lock()
	q.seq++
	seq := q.seq
	if len(q.inFlight) > 0 {
		q.events = append(q.events, recorded{seq: seq, ev: *ev})
	}
	var moved []*waiting
	visit := func(w *waiting) {
		if w.seen == seq {
			return // rejected by several interested plugins: its hints ran already
		}
		w.seen = seq
		if w.rejected.WorthRequeuing(w.pod, ev) {
			moved = append(moved, w)
		}
	}
	framework.Interested(ev).Each(func(i int) {
		for _, w := range q.byPlugin[i] {
			visit(w)
		}
	})
	for _, w := range q.anyEvent {
		visit(w)
	}
	for _, w := range moved {
		q.removeLocked(w.key)
	}
	q.mu.Unlock()
	for _, w := range moved {
		q.requeue(w, ev.Label())
	}
	return len(moved)
}

// FlushLeftover sends back the pods that waited in the pool for MaxInUnschedulable: a hint
// that was too strict, or a change no plugin registered for, costs a pod at most that long.
func (q *Queue) FlushLeftover() {
	now := q.clock.Now()
	var moved []*waiting
	q.mu.Lock()
	for _, w := range q.pool {
		if now.Sub(w.since) >= q.maxWait {
			moved = append(moved, w)
		}
	}
	for _, w := range moved {
		q.removeLocked(w.key)
	}
	q.mu.Unlock()
	for _, w := range moved {
		q.requeue(w, EventUnschedulableTimeout)
	}
}

// NumUnschedulable is the number of pods waiting in the pool.
func (q *Queue) NumUnschedulable() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pool)
}

// Len is the number of pods ready to be tried (not those backing off or in the pool).
func (q *Queue) Len() int { return q.q.Len() }

// ShutDown ends Get for the scheduling loop.
func (q *Queue) ShutDown() { q.q.ShutDown() }

// requeue sends a pod from the pool to the active queue, or to wait out its backoff.
func (q *Queue) requeue(w *waiting, why string) {
	if d := w.backoffUntil.Sub(q.clock.Now()); d > 0 {
		q.q.AddAfter(w.key, d)
		countIncoming(backoff, why)
		return
	}
	q.q.Add(w.key)
	countIncoming(active, why)
}

func (q *Queue) addLocked(w *waiting) {
	q.removeLocked(w.key)
	q.pool[w.key] = w
	if w.rejected == 0 {
		q.anyEvent[w.key] = w
	}
	w.rejected.Each(func(i int) {
		if q.byPlugin[i] == nil {
			q.byPlugin[i] = map[string]*waiting{}
		}
		q.byPlugin[i][w.key] = w
	})
	setPending(len(q.pool))
}

func (q *Queue) removeLocked(key string) *waiting {
	w, ok := q.pool[key]
	if !ok {
		return nil
	}
	delete(q.pool, key)
	delete(q.anyEvent, key)
	w.rejected.Each(func(i int) { delete(q.byPlugin[i], key) })
	setPending(len(q.pool))
	return w
}

func (q *Queue) endCycle(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.endCycleLocked(key)
}

// endCycleLocked forgets a pod's cycle, and the events no cycle still running needs.
func (q *Queue) endCycleLocked(key string) {
	delete(q.inFlight, key)
	delete(q.changed, key)
	if len(q.inFlight) == 0 {
		q.events = q.events[:0]
		return
	}
	oldest := q.seq
	for _, from := range q.inFlight {
		oldest = min(oldest, from)
	}
	n := 0
	for n < len(q.events) && q.events[n].seq <= oldest {
		n++
	}
	q.events = append(q.events[:0], q.events[n:]...)
}
