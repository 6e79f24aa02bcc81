// Package events records Kubernetes-style v1 Events through the apiserver, correlated as
// client-go's event correlator does for Kubernetes components: repeats of one event become one
// object with a count, more than 10 similar events about one object in 10 minutes are combined into one, and
// an object's events beyond a burst of 25 (refilled one per 5 minutes) are dropped, so a
// ReplicaSet creating 10,000 pods writes a few dozen Events, not 10,000.
package events

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/schemas"
)

// Recorder writes Events on behalf of one component.
type Recorder struct {
	client    *apiclient.Client
	component string
	host      string

	mu         sync.Mutex // the correlator is not safe for concurrent use
	correlator *correlator
}

// New returns a Recorder for component (e.g. "default-scheduler") on host ("" for the control plane).
func New(c *apiclient.Client, component, host string) *Recorder {
	return &Recorder{client: c, component: component, host: host, correlator: newCorrelator(clock.RealClock{})}
}

// Eventf records an event about obj. Failures are dropped: events are best-effort, as in
// Kubernetes, and must never block the component's real work.
func (r *Recorder) Eventf(ctx context.Context, obj runtime.Object, eventType, reason, format string, args ...any) {
	ref, ok := reference(obj)
	if !ok {
		return
	}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns, GenerateName: ref.Name + "."},
		InvolvedObject:      ref,
		Reason:              reason,
		Message:             fmt.Sprintf(format, args...),
		Type:                eventType,
		Count:               1,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Source:              corev1.EventSource{Component: r.component, Host: r.host},
		ReportingController: r.component,
		ReportingInstance:   r.host,
	}
	r.mu.Lock()
	ev = r.correlator.correlate(ev)
	r.mu.Unlock()
	if ev == nil {
		return
	}
	var out runtime.Object
	var err error
	// A repeat names the object remembered for it, its count and last time moved on; one whose
	// first write is still under way (no name yet), gone or changed meanwhile starts afresh.
	if ev.Count > 1 && ev.Name != "" {
		out, err = r.client.Update(ctx, ev)
	}
	if ev.Count <= 1 || ev.Name == "" || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		fresh := ev.DeepCopy()
		fresh.ResourceVersion = ""
		if ev.Count > 1 || fresh.Name == "" { // a combined event comes named; others get a name
			fresh.Name, fresh.GenerateName = "", ref.Name+"."
		}
		out, err = r.client.Create(ctx, fresh)
	}
	if err == nil {
		r.mu.Lock()
		r.correlator.written(out.(*corev1.Event))
		r.mu.Unlock()
	}
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
