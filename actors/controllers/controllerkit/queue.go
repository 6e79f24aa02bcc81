package controllerkit

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

type rateLimitingQueue = workqueue.TypedRateLimitingInterface[string]

// Queue is a controller's work queue of keys. Informer handlers hold on to it across actor
// restarts, while the queue underneath is replaced with each incarnation.
type Queue struct {
	mu sync.Mutex
	q  rateLimitingQueue
	// resyncing is set while a periodic resync enqueues keys; keys it added (and no write has
	// enqueued since) are reconciled in a trace of their own, linked to the object's last
	// write, so a long-lived object's trace does not grow by a resync span every period.
	resyncing bool
	resynced  map[string]bool
	written   map[string]bool // enqueued by an event and not yet reconciled
}

// Retry backoff per key: 5 ms doubling up to 1000 s, as kube-controller-manager does.
const (
	baseDelay = 5 * time.Millisecond
	maxDelay  = 1000 * time.Second
)

func (q *Queue) renew() rateLimitingQueue {
	nq := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](baseDelay, maxDelay))
	q.mu.Lock()
	q.q = nq
	q.mu.Unlock()
	return nq
}

func (q *Queue) current() rateLimitingQueue {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.q
}

func (q *Queue) shutDown() {
	if c := q.current(); c != nil {
		c.ShutDown()
	}
}

// Add enqueues key now (a no-op while no incarnation runs: the next one resyncs everything).
func (q *Queue) Add(key string) {
	q.mu.Lock()
	c := q.q
	if q.resynced == nil {
		q.resynced, q.written = map[string]bool{}, map[string]bool{}
	}
	switch {
	case !q.resyncing:
		q.written[key] = true
		delete(q.resynced, key)
	case !q.written[key]:
		q.resynced[key] = true
	}
	q.mu.Unlock()
	if c != nil {
		c.Add(key)
	}
}

// Resync runs f, a periodic re-enqueue of every key, marking what it adds as resynced.
func (q *Queue) Resync(f func()) {
	q.mu.Lock()
	q.resyncing = true
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.resyncing = false
		q.mu.Unlock()
	}()
	f()
}

// takeResynced reports whether key was enqueued only by a resync since its last reconcile,
// and starts that record afresh.
func (q *Queue) takeResynced(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := q.resynced[key]
	delete(q.resynced, key)
	delete(q.written, key)
	return r
}

// AddAfter enqueues key after d: timers (minReadySeconds, deadlines) are requeues.
func (q *Queue) AddAfter(key string, d time.Duration) {
	if c := q.current(); c != nil {
		c.AddAfter(key, d)
	}
}

// Len is the number of keys waiting.
func (q *Queue) Len() int {
	if c := q.current(); c != nil {
		return c.Len()
	}
	return 0
}
