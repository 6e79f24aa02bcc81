// Package events records Kubernetes-style v1 Events through the apiserver, aggregating repeats
// of the same event into one object with a count, as kubectl describe users expect.
package events

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/schemas"
)

// Recorder writes Events on behalf of one component.
type Recorder struct {
	client    *apiclient.Client
	component string
	host      string

	mu   sync.Mutex
	seen map[string]*corev1.Event // aggregation key -> the stored event
}

// New returns a Recorder for component (e.g. "default-scheduler") on host ("" for the control plane).
func New(c *apiclient.Client, component, host string) *Recorder {
	return &Recorder{client: c, component: component, host: host, seen: map[string]*corev1.Event{}}
}

// aggregationWindow: a repeat within it bumps the count of the same Event object.
const aggregationWindow = 10 * time.Minute

// Eventf records an event about obj. Failures are dropped: events are best-effort, as in
// Kubernetes, and must never block the component's real work.
func (r *Recorder) Eventf(ctx context.Context, obj runtime.Object, eventType, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	ref, ok := reference(obj)
	if !ok {
		return
	}
	key := string(ref.UID) + "\x00" + reason + "\x00" + msg
	now := metav1.NewTime(time.Now().UTC())
	r.mu.Lock()
	prev := r.seen[key]
	r.mu.Unlock()
	if prev != nil && now.Sub(prev.LastTimestamp.Time) < aggregationWindow {
		next := prev.DeepCopy()
		next.Count++
		next.LastTimestamp = now
		if out, err := r.client.Update(ctx, next); err == nil {
			r.remember(key, out.(*corev1.Event))
			return
		}
	}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns, GenerateName: ref.Name + "."},
		InvolvedObject:      ref,
		Reason:              reason,
		Message:             msg,
		Type:                eventType,
		Count:               1,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Source:              corev1.EventSource{Component: r.component, Host: r.host},
		ReportingController: r.component,
		ReportingInstance:   r.host,
	}
	if out, err := r.client.Create(ctx, ev); err == nil {
		r.remember(key, out.(*corev1.Event))
	}
}

func (r *Recorder) remember(key string, ev *corev1.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) > 4096 { // bounded: forget everything rather than grow without end
		r.seen = map[string]*corev1.Event{}
	}
	r.seen[key] = ev
}

func reference(obj runtime.Object) (corev1.ObjectReference, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return corev1.ObjectReference{}, false
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" {
		if gvks, _, err := schemas.Scheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
			gvk = gvks[0]
		}
	}
	return corev1.ObjectReference{
		Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(), Namespace: m.GetNamespace(), Name: m.GetName(),
		UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(),
	}, true
}
