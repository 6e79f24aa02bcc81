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
	if c := q.current(); c != nil {
		c.Add(key)
	}
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
