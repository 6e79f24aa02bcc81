package scheduler

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// volumeBindTimeout is how long a pod waits for its claims to be bound before its scheduling
// fails and is retried (kube-scheduler's default bindTimeoutSeconds).
const volumeBindTimeout = 10 * time.Minute

var errVolumeBindTimeout = errors.New("binding volumes: timed out waiting for the claims to be bound")

// volumeWaits holds the pods whose claims were given their node but are not bound yet. As
// kube-scheduler's VolumeBinding PreBind, the pod is bound only once the binder has bound its
// claims, so its kubelet never sees a claim it cannot mount. The wait holds no binder: the pod
// is parked by claim, and a claim's or volume's event hands it back to the binders.
type volumeWaits struct {
	mu      sync.Mutex
	pods    map[string]*volumeWait         // pod key -> wait
	byClaim map[string]map[string]struct{} // claim key -> pod keys
	ready   []*volumeWait                  // all claims bound: to bind
	wake    chan struct{}                  // cap 1: ready has entries
}

type volumeWait struct {
	key      string
	pod      *corev1.Pod
	node     string
	start    time.Time
	deadline time.Time
	claims   []string
}

func newVolumeWaits() *volumeWaits {
	return &volumeWaits{pods: map[string]*volumeWait{}, byClaim: map[string]map[string]struct{}{}, wake: make(chan struct{}, 1)}
}

func (w *volumeWaits) park(v *volumeWait) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pods[v.key] = v
	for _, c := range v.claims {
		if w.byClaim[c] == nil {
			w.byClaim[c] = map[string]struct{}{}
		}
		w.byClaim[c][v.key] = struct{}{}
	}
}

// take removes the pod's wait, reporting whether it was there (so one caller binds it).
func (w *volumeWaits) take(k string) (*volumeWait, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.pods[k]
	if ok {
		w.unindex(v)
	}
	return v, ok
}

func (w *volumeWaits) unindex(v *volumeWait) {
	delete(w.pods, v.key)
	for _, c := range v.claims {
		delete(w.byClaim[c], v.key)
		if len(w.byClaim[c]) == 0 {
			delete(w.byClaim, c)
		}
	}
}

// claimChanged moves the pods waiting on the claim whose claims are all bound now to ready.
func (w *volumeWaits) claimChanged(claim string, bound func(*corev1.Pod) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	moved := false
	for k := range w.byClaim[claim] {
		if v := w.pods[k]; bound(v.pod) {
			w.unindex(v)
			w.ready = append(w.ready, v)
			moved = true
		}
	}
	if moved {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// due returns the pods ready to bind and those whose wait timed out, removing both; the
// others are still waiting.
func (w *volumeWaits) due(now time.Time) (ready, expired, waiting []*volumeWait) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ready, w.ready = w.ready, nil
	for _, v := range w.pods {
		if now.After(v.deadline) {
			w.unindex(v)
			expired = append(expired, v)
		} else {
			waiting = append(waiting, v)
		}
	}
	return ready, expired, waiting
}

// awaitClaims parks the pod until its claims are bound; false when they already are (the pod
// is bound now). Checking again after parking closes the gap in which the last claim's event
// could have come and gone.
func (a *schedulerActor) awaitClaims(k string, pod *corev1.Pod, node string, start time.Time) bool {
	v := a.st.vols
	claims := v.unboundClaims(pod)
	if len(claims) == 0 {
		return false
	}
	a.waits.park(&volumeWait{key: k, pod: pod, node: node, start: start, deadline: time.Now().Add(volumeBindTimeout), claims: claims})
	if v.claimsBound(pod) {
		if _, ok := a.waits.take(k); ok {
			return false
		}
	}
	return true
}

// bindWaiting hands pods whose claims are bound to the binders and fails those that waited too
// long, until the incarnation ends.
func (a *schedulerActor) bindWaiting(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.waits.wake:
		case <-t.C:
		}
		ready, expired, waiting := a.waits.due(time.Now())
		for _, v := range waiting {
			a.cache.Renew(v.pod) // still headed for its node: keep its place there
		}
		for _, v := range ready {
			a.submit(ctx, func() { a.bindNow(ctx, v.key, v.pod, v.node, v.start) })
		}
		for _, v := range expired {
			a.submit(ctx, func() { a.bindFailed(ctx, v.key, v.pod, errVolumeBindTimeout) })
		}
	}
}

// dropWait forgets a parked pod that was deleted.
func (a *schedulerActor) dropWait(k string) {
	if v, ok := a.waits.take(k); ok {
		a.cache.Forget(v.pod)
	}
}
