package systembench

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// podRec is what the bench saw of one pod.
type podRec struct {
	phase     int       // the measured phase in which the watch first saw it Running
	created   time.Time // metadata.creationTimestamp (whole seconds)
	running   time.Time // first seen Running
	isRunning bool      // Running now (and not deleted)
}

// podTracker follows the bench's Running pods through a watch and notes when their count
// first reaches the current phase's target.
type podTracker struct {
	mu      sync.Mutex
	phase   int
	target  int
	byUID   map[types.UID]*podRec
	running int
	reached time.Time
}

// begin starts phase n, done once target pods are Running at once.
func (t *podTracker) begin(n, target int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.phase, t.target, t.reached = n, target, time.Time{}
}

// progress is how many pods are Running and when the target was reached (zero: not yet).
func (t *podTracker) progress() (running int, reached time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running, t.reached
}

func (t *podTracker) observe(p *corev1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	run := p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
	r, ok := t.byUID[p.UID]
	if !ok {
		if !run {
			return
		}
		r = &podRec{phase: t.phase, created: p.CreationTimestamp.Time, running: now}
		t.byUID[p.UID] = r
	}
	t.setRunning(r, run, now)
}

func (t *podTracker) forget(uid types.UID, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.byUID[uid]; ok {
		t.setRunning(r, false, now)
	}
}

func (t *podTracker) setRunning(r *podRec, run bool, now time.Time) {
	if run == r.isRunning {
		return
	}
	r.isRunning = run
	if run {
		t.running++
	} else {
		t.running--
	}
	if t.target > 0 && t.running >= t.target && t.reached.IsZero() {
		t.reached = now
	}
}

// latencies from creationTimestamp to Running of the pods that went Running in phase n;
// stopped counts those of them no longer Running.
func (t *podTracker) latencies(n int) (fromCreated []time.Duration, stopped int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.byUID {
		if r.phase != n {
			continue
		}
		fromCreated = append(fromCreated, r.running.Sub(r.created))
		if !r.isRunning {
			stopped++
		}
	}
	return fromCreated, stopped
}

// nodeRec is what the bench saw of one node's Ready condition.
type nodeRec struct {
	ready        bool
	readySince   metav1.Time // Ready's lastTransitionTime when first seen Ready
	seenReady    bool
	wentNotReady bool
}

// nodeTracker counts Ready nodes and the nodes that stopped being Ready at any point after
// they first were. A transition and its recovery both missed by the watch (a relist between
// them) still count: the Ready condition's lastTransitionTime moves.
type nodeTracker struct {
	mu       sync.Mutex
	byName   map[string]*nodeRec
	readyNow int
	notReady int
}

func (t *nodeTracker) observe(n *corev1.Node) {
	var cond *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			cond = &n.Status.Conditions[i]
		}
	}
	ready := cond != nil && cond.Status == corev1.ConditionTrue
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.byName[n.Name]
	if !ok {
		r = &nodeRec{}
		t.byName[n.Name] = r
	}
	switch {
	case ready && !r.seenReady:
		r.seenReady, r.readySince = true, cond.LastTransitionTime
	case ready && !cond.LastTransitionTime.Equal(&r.readySince):
		t.wentNotReady(r)
	case !ready && r.seenReady:
		t.wentNotReady(r)
	}
	t.setReady(r, ready)
}

func (t *nodeTracker) forget(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.byName[name]; ok {
		if r.seenReady {
			t.wentNotReady(r)
		}
		t.setReady(r, false)
		delete(t.byName, name)
	}
}

func (t *nodeTracker) wentNotReady(r *nodeRec) {
	if !r.wentNotReady {
		r.wentNotReady = true
		t.notReady++
	}
}

func (t *nodeTracker) setReady(r *nodeRec, ready bool) {
	if ready != r.ready {
		r.ready = ready
		if ready {
			t.readyNow++
		} else {
			t.readyNow--
		}
	}
}

// counts is how many nodes are Ready now and how many went NotReady so far.
func (t *nodeTracker) counts() (ready, wentNotReady int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.readyNow, t.notReady
}

// watchers run client-go informers on the bench's pods and on every node.
type watchers struct {
	pods  *podTracker
	nodes *nodeTracker
}

func startWatchers(ctx context.Context, cs kubernetes.Interface, namespace, selector string) (*watchers, error) {
	w := &watchers{
		pods:  &podTracker{byUID: map[types.UID]*podRec{}},
		nodes: &nodeTracker{byName: map[string]*nodeRec{}},
	}
	// Running pods only, selected by the server: the bench measures when pods run, and a watch
	// of every state would decode each pod four times over on the machine it measures (a tenth
	// of all the CPU the system used per pod). A pod that stops Running leaves the selection
	// and arrives as a delete.
	podInf := coreinformers.NewFilteredPodInformer(cs, namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) {
			o.LabelSelector, o.FieldSelector = selector, "status.phase="+string(corev1.PodRunning)
		})
	nodeInf := coreinformers.NewNodeInformer(cs, 0, cache.Indexers{})
	// The bench holds every pod and node, on the machine it measures: its caches keep only
	// what the trackers read, so its collector has a few small objects to mark, not 30,000 pods.
	if err := podInf.SetTransform(podSkeleton); err != nil {
		return nil, err
	}
	if err := nodeInf.SetTransform(nodeSkeleton); err != nil {
		return nil, err
	}
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.pods.observe(obj.(*corev1.Pod), time.Now()) },
		UpdateFunc: func(_, obj any) { w.pods.observe(obj.(*corev1.Pod), time.Now()) },
		DeleteFunc: func(obj any) {
			if p, ok := deleted[*corev1.Pod](obj); ok {
				w.pods.forget(p.UID, time.Now())
			}
		},
	}); err != nil {
		return nil, err
	}
	if _, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.nodes.observe(obj.(*corev1.Node)) },
		UpdateFunc: func(_, obj any) { w.nodes.observe(obj.(*corev1.Node)) },
		DeleteFunc: func(obj any) {
			if n, ok := deleted[*corev1.Node](obj); ok {
				w.nodes.forget(n.Name)
			}
		},
	}); err != nil {
		return nil, err
	}
	go podInf.RunWithContext(ctx)
	go nodeInf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, nodeInf.HasSynced) {
		return nil, fmt.Errorf("watching pods and nodes: %w", context.Cause(ctx))
	}
	return w, nil
}

// deleted is the object of a delete notification, also when the watch missed the delete.
func deleted[T any](obj any) (T, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t, ok := obj.(T)
	return t, ok
}

// podSkeleton is what the pod tracker and the informer's cache read of a pod.
func podSkeleton(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone: its object was transformed when it was cached
	}
	return &corev1.Pod{ObjectMeta: identity(p.ObjectMeta), Status: corev1.PodStatus{Phase: p.Status.Phase}}, nil
}

// nodeSkeleton is what the node tracker and the informer's cache read of a node.
func nodeSkeleton(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{ObjectMeta: identity(n.ObjectMeta)}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	return out, nil
}

func identity(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp}
}
