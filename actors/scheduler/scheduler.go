// Package scheduler is the scheduler actor: it watches unbound pods and nodes in the state log,
// picks a node for each pod with the framework's filters and scores, and binds through the
// apiserver's binding subresource (a compare-and-swap, so a pod is never bound twice).
package scheduler

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/events"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/actors/scheduler/framework"
	"github.com/skiff-sh/skiff/bus/statelog"
)

// Name is the schedulerName this scheduler serves.
const Name = "default-scheduler"

// Config configures the scheduler actor.
type Config struct {
	Log     *statelog.Log
	Client  *apiclient.Client
	Binders int // concurrent binds in flight; default 32
	Options framework.Options
	OnBind  func(pod, node string) // test hook, may be nil
}

// state outlives actor restarts: the caches resume from the revision they had.
type state struct {
	cfg      Config
	pods     *informer.Informer
	nodes    *informer.Informer
	cache    *framework.Cache
	qmu      sync.Mutex
	queue    workqueue.TypedRateLimitingInterface[string] // one per actor incarnation
	recorder *events.Recorder
	once     sync.Once
	stopAll  context.CancelFunc
}

// NewActor returns the producer of the scheduler actor.
func NewActor(cfg Config) func() actorkit.Actor {
	if cfg.Binders == 0 {
		cfg.Binders = 32
	}
	st := &state{cfg: cfg}
	return func() actorkit.Actor { return &schedulerActor{st: st} }
}

type schedulerActor struct {
	st     *state
	cancel context.CancelFunc
	done   sync.WaitGroup
}

func (a *schedulerActor) Receive(ctx actorkit.Context) {
	switch ctx.Message().(type) {
	case *actorkit.Started:
		a.st.once.Do(a.st.startCaches)
		run, cancel := context.WithCancel(context.Background())
		a.cancel = cancel
		q := a.st.newQueue()
		a.done.Add(1)
		go func() { defer a.done.Done(); a.st.worker(run, q, &a.done) }()
		// Level-triggered: whatever is unbound now is work, whatever happened before a restart.
		a.st.retryUnschedulable()
	case *actorkit.Stopping, *actorkit.Restarting:
		a.cancel()
		a.st.queueOf().ShutDown()
		a.done.Wait()
	case *actorkit.Stopped:
		// Stopped for good (not a restart): end the caches too. Running again takes a new NewActor.
		a.st.stopAll()
	case *actorkit.Crash:
		panic("scheduler: crash requested by test hook")
	}
}

func (st *state) startCaches() {
	ctx, cancel := context.WithCancel(context.Background())
	st.stopAll = cancel
	st.cache = framework.NewCache()
	st.recorder = events.New(st.cfg.Client, Name, "")
	st.nodes = informer.For(st.cfg.Log, "", "nodes")
	st.pods = informer.For(st.cfg.Log, "", "pods")
	st.nodes.AddHandler(informer.Funcs{
		Add:    func(o runtime.Object) { st.cache.UpsertNode(o.(*corev1.Node)); st.retryUnschedulable() },
		Update: func(_, o runtime.Object) { st.cache.UpsertNode(o.(*corev1.Node)); st.retryUnschedulable() },
		Delete: func(o runtime.Object) { st.cache.DeleteNode(o.(*corev1.Node).Name) },
	})
	st.pods.AddHandler(informer.Funcs{
		Add:    func(o runtime.Object) { st.onPod(nil, o.(*corev1.Pod)) },
		Update: func(old, o runtime.Object) { st.onPod(old.(*corev1.Pod), o.(*corev1.Pod)) },
		Delete: func(o runtime.Object) {
			p := o.(*corev1.Pod)
			if p.Spec.NodeName != "" {
				st.cache.RemovePod(p)
				st.retryUnschedulable()
			}
		},
	})
	go st.nodes.Run(ctx)
	go st.pods.Run(ctx)
}

func (st *state) onPod(old, p *corev1.Pod) {
	switch {
	case p.Spec.NodeName != "" && (old == nil || old.Spec.NodeName == ""):
		st.cache.AddPod(p) // confirms an assumption, or counts a pod bound elsewhere
	case p.Spec.NodeName != "":
		st.cache.UpdatePod(old, p)
	case ours(p) && p.DeletionTimestamp == nil:
		st.enqueue(p.Namespace + "/" + p.Name)
	}
}

// newQueue: an unschedulable pod is retried after 1 s doubling to 10 s, as kube-scheduler does
// (podInitialBackoffSeconds, podMaxBackoffSeconds); a node change retries at once.
func (st *state) newQueue() workqueue.TypedRateLimitingInterface[string] {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 10*time.Second))
	st.qmu.Lock()
	st.queue = q
	st.qmu.Unlock()
	return q
}

func (st *state) queueOf() workqueue.TypedRateLimitingInterface[string] {
	st.qmu.Lock()
	defer st.qmu.Unlock()
	return st.queue
}

func (st *state) enqueue(key string) {
	if q := st.queueOf(); q != nil {
		q.Add(key)
	}
}

// retryUnschedulable: a change in capacity may make waiting pods fit.
func (st *state) retryUnschedulable() {
	for _, o := range st.pods.List(func(o runtime.Object) bool {
		p := o.(*corev1.Pod)
		return p.Spec.NodeName == "" && p.DeletionTimestamp == nil && ours(p)
	}) {
		p := o.(*corev1.Pod)
		st.enqueue(p.Namespace + "/" + p.Name)
	}
}

// worker runs scheduling cycles one at a time (so two pods are never placed on one snapshot)
// and binds asynchronously, up to Binders binds in flight, as kube-scheduler does.
func (st *state) worker(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], binds *sync.WaitGroup) {
	inflight := make(chan struct{}, st.cfg.Binders)
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		bind, err := st.scheduleOne(ctx, key)
		if err != nil || bind == nil {
			st.settle(ctx, q, key, err)
			continue
		}
		inflight <- struct{}{}
		binds.Add(1)
		go func() {
			defer binds.Done()
			defer func() { <-inflight }()
			st.settle(ctx, q, key, bind())
		}()
	}
}

func (st *state) settle(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], key string, err error) {
	if err != nil && ctx.Err() == nil {
		q.AddRateLimited(key)
	} else {
		q.Forget(key)
	}
	q.Done(key)
}

// scheduleOne runs one scheduling cycle: it picks a node and assumes the pod there, and
// returns the bind to run next (nil when there is nothing to bind).
func (st *state) scheduleOne(ctx context.Context, key string) (func() error, error) {
	ns, name := splitKey(key)
	o, ok := st.pods.Get(ns, name)
	if !ok {
		return nil, nil
	}
	pod := o.(*corev1.Pod)
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || !ours(pod) {
		return nil, nil
	}
	start := time.Now()
	// The cycle continues the trace of the write that created the pod.
	ctx, span := otel.Tracer("skiff/scheduler").Start(st.pods.TraceContext(ctx, ns, name), "schedule pod",
		trace.WithAttributes(attribute.String("k8s.pod", key)))
	res, err := framework.Schedule(st.cache.Snapshot(), pod, st.cfg.Options)
	if err != nil {
		span.RecordError(err)
		span.End()
	} else {
		span.SetAttributes(attribute.String("k8s.node", res.Node))
	}
	var fit *framework.FitError
	if errors.As(err, &fit) {
		observeAttempt(resultUnschedulable, start)
		st.markUnschedulable(ctx, pod, fit.Error())
		return nil, err
	}
	if err != nil {
		observeAttempt(resultError, start)
		return nil, err
	}
	if err := st.cache.Assume(pod, res.Node); err != nil {
		observeAttempt(resultError, start)
		span.End()
		return nil, err
	}
	return func() error {
		defer span.End()
		if err := st.cfg.Client.Bind(ctx, ns, name, res.Node); err != nil {
			observeAttempt(resultError, start)
			st.cache.Forget(pod)
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return nil // bound by someone else, or gone: the informer brings the truth
			}
			st.recorder.Eventf(ctx, pod, corev1.EventTypeWarning, "FailedScheduling", "Binding rejected: %v", err)
			return err
		}
		observeAttempt(resultScheduled, start)
		if st.cfg.OnBind != nil {
			st.cfg.OnBind(key, res.Node)
		}
		st.recorder.Eventf(ctx, pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s to %s", key, res.Node)
		return nil
	}, nil
}

func (st *state) markUnschedulable(ctx context.Context, pod *corev1.Pod, msg string) {
	st.recorder.Eventf(ctx, pod, corev1.EventTypeWarning, "FailedScheduling", "%s", msg)
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message == msg {
			return
		}
	}
	next := pod.DeepCopy()
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: msg, LastTransitionTime: metav1.NewTime(time.Now().UTC())}
	replaced := false
	for i := range next.Status.Conditions {
		if next.Status.Conditions[i].Type == corev1.PodScheduled {
			next.Status.Conditions[i], replaced = cond, true
		}
	}
	if !replaced {
		next.Status.Conditions = append(next.Status.Conditions, cond)
	}
	_, _ = st.cfg.Client.UpdateStatus(ctx, next)
}

// ours: pods for this scheduler (an empty name is defaulted to it by the apiserver).
func ours(p *corev1.Pod) bool { return p.Spec.SchedulerName == Name || p.Spec.SchedulerName == "" }

func splitKey(key string) (string, string) {
	for i := range key {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}
