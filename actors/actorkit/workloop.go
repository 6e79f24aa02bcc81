package actorkit

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Retry calls f until it succeeds or ctx ends, waiting first after the first failure and
// doubling up to max after each further one; each failure goes to onErr. It reports whether
// f succeeded.
func Retry(ctx context.Context, first, max time.Duration, f func() error, onErr func(error)) bool {
	for backoff := first; ; backoff = min(2*backoff, max) {
		err := f()
		if err == nil {
			return true
		}
		onErr(err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
	}
}

// NewKeyQueue is the rate-limited queue of object keys Drain consumes: a failed key waits 5 ms,
// doubling up to 30 s.
func NewKeyQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 30*time.Second))
}

// Drain syncs the keys q hands out, one at a time, until q shuts down: a failed key is
// requeued rate-limited (and given to onErr unless ctx has ended), a synced one forgotten.
func Drain(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sync func(key string) error, onErr func(key string, err error)) {
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		if err := sync(key); err != nil && ctx.Err() == nil {
			onErr(key, err)
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}
