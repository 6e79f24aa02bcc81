package kubelet

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// backoff is the crash-loop delay of each container (pod UID + name): the first restart is
// immediate, each later one waits base doubling up to max, counted from the exit; a run of
// at least reset starts the sequence over. It lives in memory: a brand-new agent starts
// again from an immediate restart, as the kubelet does after its own restart.
type backoff struct {
	base, max, reset time.Duration

	mu sync.Mutex
	m  map[backoffKey]time.Duration // the delay before the next restart
}

type backoffKey struct {
	uid  types.UID
	name string
}

func newBackoff(base, max, reset time.Duration) *backoff {
	return &backoff{base: base, max: max, reset: reset, m: map[backoffKey]time.Duration{}}
}

// wait is how long a container that ran from started to finished must still wait before its
// restart (<= 0: restart now), and the delay that applies.
func (b *backoff) wait(uid types.UID, name string, started, finished, now time.Time) (time.Duration, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := backoffKey{uid, name}
	if !started.IsZero() && finished.Sub(started) >= b.reset {
		delete(b.m, key)
	}
	d := b.m[key]
	if finished.IsZero() {
		finished = now
	}
	return finished.Add(d).Sub(now), d
}

// restarted records a restart: the next one waits longer.
func (b *backoff) restarted(uid types.UID, name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := backoffKey{uid, name}
	switch d := b.m[key]; {
	case d == 0:
		b.m[key] = b.base
	default:
		b.m[key] = min(2*d, b.max)
	}
}

func (b *backoff) forget(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for key := range b.m {
		if key.uid == uid {
			delete(b.m, key)
		}
	}
}
