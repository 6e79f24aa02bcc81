package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/tracing/tracingtest"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/echoapp"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

var traced = echoapp.App{Name: "traced"}.Manifest()

// One apply of a Deployment and its Service is one trace, down to the node: the apiserver's
// writes, the deployment and replicaset controllers, the scheduler's bind, the kubelet's sync
// with its containerd calls and probe results, the endpointslice controller and the proxy's
// map update, each the child of the write that caused it.
func TestApplyIsOneTraceDownToTheNode(t *testing.T) {
	exp, tp := tracingtest.InMemory(t)
	n := startNode(t)

	// What `skiff apply -f` does: one root span around the requests.
	docs, err := schemas.DecodeManifests([]byte(traced))
	if err != nil {
		t.Fatal(err)
	}
	root, span := tp.Tracer("skiff/cli").Start(context.Background(), "skiff apply")
	for _, d := range docs {
		if _, err := n.cp.Client.Create(root, d.Object); err != nil {
			t.Fatal(err)
		}
	}
	span.End()
	traceID := span.SpanContext().TraceID()

	pods := n.waitReady(t, "app=traced", 2)
	svcKind, _ := schemas.ByResource("", "v1", "services")
	obj, err := n.cp.Client.Get(context.Background(), svcKind, "default", "traced")
	if err != nil {
		t.Fatal(err)
	}
	vip := obj.(*corev1.Service).Spec.ClusterIP
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		out, err := n.exec(t, pods[0], "-probe", "http://"+vip+":80/")
		if err != nil {
			return fmt.Errorf("GET via %s: %v: %s", vip, err, out)
		}
		return nil
	})

	// The journey, read backwards from the proxy's map update: each step's parent chain
	// reaches the step before it.
	journey := []string{"proxy update service maps", "update endpointslices|create endpointslices", "endpointslice sync",
		"update pods/status", "kubelet sync pod", "create pods/binding", "schedule pod", "create pods",
		"reconcile replicaset-controller", "create replicasets", "reconcile deployment-controller", "create deployments", "skiff apply"}
	var tr *spanTree
	testutil.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		tr = newSpanTree(exp.GetSpans(), traceID)
		return tr.check(journey)
	})
	t.Logf("trace %s (%d spans):\n%s", traceID, len(tr.spans), tr.render())
}

// spanTree is one trace's spans, indexed by id.
type spanTree struct {
	spans    []tracetest.SpanStub
	byID     map[trace.SpanID]*tracetest.SpanStub
	children map[trace.SpanID][]*tracetest.SpanStub
}

func newSpanTree(all tracetest.SpanStubs, id trace.TraceID) *spanTree {
	t := &spanTree{byID: map[trace.SpanID]*tracetest.SpanStub{}, children: map[trace.SpanID][]*tracetest.SpanStub{}}
	for _, s := range all {
		if s.SpanContext.TraceID() == id {
			t.spans = append(t.spans, s)
		}
	}
	sort.Slice(t.spans, func(i, j int) bool { return t.spans[i].StartTime.Before(t.spans[j].StartTime) })
	for i := range t.spans {
		s := &t.spans[i]
		t.byID[s.SpanContext.SpanID()] = s
	}
	for i := range t.spans {
		s := &t.spans[i]
		t.children[s.Parent.SpanID()] = append(t.children[s.Parent.SpanID()], s)
	}
	return t
}

// component names who made a span, from its instrumentation scope and name.
func component(s *tracetest.SpanStub) string {
	switch scope := s.InstrumentationScope.Name; {
	case scope == "skiff/apiserver":
		return "apiserver"
	case scope == "skiff/containerd":
		return "kubelet"
	case strings.HasPrefix(s.Name, "reconcile "):
		c := strings.TrimPrefix(s.Name, "reconcile ")
		if strings.HasPrefix(c, "kubelet/") {
			return "kubelet"
		}
		return c
	case scope == "skiff/controllers" && strings.HasPrefix(s.Name, "endpointslice"):
		return "endpointslice-controller"
	case strings.HasPrefix(scope, "skiff/"):
		return strings.TrimPrefix(scope, "skiff/")
	case strings.Contains(scope, "go-cni"):
		return "cni" // the CNI library's own spans, inside the kubelet's
	default:
		return "containerd" // the containerd client's own spans, inside the kubelet's
	}
}

func matches(s *tracetest.SpanStub, names string) bool {
	for _, n := range strings.Split(names, "|") {
		if s.Name == n {
			return true
		}
	}
	return false
}

// check wants every span of the trace anchored (its parent in the trace, or a link into it),
// every component present with the spans named below, and the journey as a parent chain.
func (t *spanTree) check(journey []string) error {
	comps := map[string]int{}
	names := map[string]int{}
	for i := range t.spans {
		s := &t.spans[i]
		comps[component(s)]++
		names[s.Name]++
		if s.Name == "skiff apply" || t.byID[s.Parent.SpanID()] != nil {
			continue
		}
		linked := false
		for _, l := range s.Links {
			linked = linked || t.byID[l.SpanContext.SpanID()] != nil
		}
		if !linked {
			return fmt.Errorf("span %q (%s) has its parent %s outside the exported trace and no link into it", s.Name, component(s), s.Parent.SpanID())
		}
	}
	for _, c := range []string{"apiserver", "deployment-controller", "replicaset-controller", "scheduler", "kubelet", "endpointslice-controller", "proxy"} {
		if comps[c] == 0 {
			return fmt.Errorf("no span from %s; components: %v", c, comps)
		}
	}
	for _, n := range []string{"containerd create sandbox", "containerd start sandbox", "containerd create container", "containerd start container", "kubelet probe"} {
		if names[n] == 0 {
			return fmt.Errorf("no %q span; spans: %v", n, names)
		}
	}
	if !t.probeLinked() {
		return fmt.Errorf("no kubelet sync links to a probe result")
	}
	for i := range t.spans {
		s := &t.spans[i]
		if s.Name != journey[0] || !hasEndpoints(s) {
			continue
		}
		if t.chain(s, journey[1:]) {
			return nil
		}
	}
	return fmt.Errorf("no %q span with endpoints whose ancestors are %v", journey[0], journey[1:])
}

func hasEndpoints(s *tracetest.SpanStub) bool {
	for _, a := range s.Attributes {
		if a.Key == "skiff.proxy.endpoints" {
			return a.Value.AsInt64() > 0
		}
	}
	return false
}

// chain reports whether s's ancestors, nearest first, include the steps in order.
func (t *spanTree) chain(s *tracetest.SpanStub, steps []string) bool {
	for p := t.byID[s.Parent.SpanID()]; p != nil && len(steps) > 0; p = t.byID[p.Parent.SpanID()] {
		if matches(p, steps[0]) {
			steps = steps[1:]
		}
	}
	return len(steps) == 0
}

func (t *spanTree) probeLinked() bool {
	for i := range t.spans {
		if t.spans[i].Name != "kubelet sync pod" {
			continue
		}
		for _, l := range t.spans[i].Links {
			if p := t.byID[l.SpanContext.SpanID()]; p != nil && p.Name == "kubelet probe" {
				return true
			}
		}
	}
	return false
}

// render draws the tree: component, operation, start offset from the root, duration, links.
func (t *spanTree) render() string {
	var b strings.Builder
	if len(t.spans) == 0 {
		return ""
	}
	t0 := t.spans[0].StartTime
	var walk func(s *tracetest.SpanStub, depth int)
	walk = func(s *tracetest.SpanStub, depth int) {
		links := ""
		if len(s.Links) > 0 {
			links = fmt.Sprintf("  (%d links)", len(s.Links))
		}
		fmt.Fprintf(&b, "%s%-24s %-40s +%-9v %v%s\n", strings.Repeat("  ", depth), component(s), s.Name,
			s.StartTime.Sub(t0).Round(time.Millisecond), s.EndTime.Sub(s.StartTime).Round(time.Microsecond), links)
		for _, c := range t.children[s.SpanContext.SpanID()] {
			walk(c, depth+1)
		}
	}
	for i := range t.spans {
		s := &t.spans[i]
		if t.byID[s.Parent.SpanID()] == nil {
			walk(s, 0)
		}
	}
	return b.String()
}
