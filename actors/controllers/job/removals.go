package job

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// finalizerRemovals are the pods whose tracking finalizer this controller has removed (or is
// removing) while the pod cache may still show it, as kube-controller-manager's finalizer
// expectations: the pod cache can lag behind the Job cache, which may already count the
// pod's outcome, and a stale pod still carrying the finalizer would be counted again (a Job
// then "completes" one pod short and deletes a running one).
type finalizerRemovals struct {
	mu   sync.Mutex
	uids sets.Set[types.UID]
}

func newFinalizerRemovals() *finalizerRemovals {
	return &finalizerRemovals{uids: sets.New[types.UID]()}
}

// expect is called before a removal is sent, so the cache cannot show it first.
func (r *finalizerRemovals) expect(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.uids.Insert(uid)
}

// observed forgets uid: its removal failed, or the cache shows the pod without the finalizer
// or gone.
func (r *finalizerRemovals) observed(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.uids.Delete(uid)
}

// podSeen is the pod cache's news of p.
func (r *finalizerRemovals) podSeen(p *corev1.Pod) {
	if !hasTrackingFinalizer(p) {
		r.observed(p.UID)
	}
}

// pending is a copy of the removals not yet seen; a sync takes it before it reads the pod
// cache, so every pod it reads either shows its removal or is in the copy.
func (r *finalizerRemovals) pending() sets.Set[types.UID] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.uids.Clone()
}
