package kubelet

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/internal/tracing"
)

// tracer is looked up per span: a Tracer taken from the global provider once would stay bound
// to the first provider installed (tests install their own).
func tracer() trace.Tracer { return otel.Tracer("skiff/kubelet") }

// tracedSync runs syncKey in the span "kubelet sync pod", a child of the trace stored with the
// pod's latest write (for a new pod: the scheduler's binding, inside the Deployment's trace),
// so the containerd calls and the status write the sync makes continue that trace. A sync is
// level-triggered and can fold several writes and probe results into one: those that are not
// the latest write become links. A sync asked for only by the periodic resync starts a trace
// of its own linked to the latest write, so a long-lived pod's trace does not grow every period.
func (k *kubelet) tracedSync(ctx context.Context, key string, resync bool) (syncOutcome, error) {
	ns, name := controllerkit.SplitKey(key)
	parent := k.pods.TraceContext(ctx, ns, name)
	latest := trace.SpanContextFromContext(parent)
	links := k.links.Take(key, latest)
	opts := []trace.SpanStartOption{trace.WithAttributes(attribute.String("k8s.namespace.name", ns),
		attribute.String("k8s.pod.name", name), attribute.String("k8s.node.name", k.cfg.NodeName))}
	if resync {
		opts = append(opts, trace.WithNewRoot(), trace.WithAttributes(attribute.Bool("skiff.resync", true)))
		if latest.IsValid() {
			links = append(links, trace.Link{SpanContext: latest})
		}
	}
	ctx, span := tracer().Start(parent, "kubelet sync pod", append(opts, trace.WithLinks(links...))...)
	out, err := k.syncKey(ctx, key)
	tracing.End(span, err)
	return out, err
}

// noteWrite records a pod write's trace as a cause of the pod's next sync.
func (k *kubelet) noteWrite(p *corev1.Pod) {
	k.links.Add(controllerkit.KeyOf(p), k.pods.TraceContext(context.Background(), p.Namespace, p.Name))
}

// traceProbeChange records a probe result change as the span "kubelet probe", covering the
// probe run that changed it, in the trace of the pod's latest write; the sync it wakes links to it.
func (k *kubelet) traceProbeChange(pod *corev1.Pod, kind, container string, ok bool, msg string, start time.Time) {
	parent := k.pods.TraceContext(context.Background(), pod.Namespace, pod.Name)
	result := "success"
	if !ok {
		result = "failure"
	}
	ctx, span := tracer().Start(parent, "kubelet probe", trace.WithTimestamp(start), trace.WithAttributes(
		attribute.String("k8s.namespace.name", pod.Namespace), attribute.String("k8s.pod.name", pod.Name),
		attribute.String("k8s.container.name", container), attribute.String("skiff.probe.kind", kind),
		attribute.String("skiff.probe.result", result), attribute.String("skiff.probe.message", msg)))
	span.End()
	k.links.Add(controllerkit.KeyOf(pod), ctx)
}
