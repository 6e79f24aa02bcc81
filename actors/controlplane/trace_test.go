package controlplane_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/internal/tracing/tracingtest"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// One create of a Deployment is one trace: the apiserver's request, the deployment controller's
// reconcile, its ReplicaSet create, the replicaset controller's reconcile, the pod creates, and
// the scheduler's cycles and binds all share the trace id, linked parent to child through the
// trace context stored with each write in the log.
func TestDeploymentCreateIsOneTrace(t *testing.T) {
	exp, tp := tracingtest.InMemory(t)

	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) {
		c.Components = []string{"apiserver", "scheduler", "deployment", "replicaset"}
	})
	ctx := context.Background()
	readyNode(t, cp.Client, "n1")

	root, span := tp.Tracer("test").Start(ctx, "skiff apply")
	_, err := cp.Client.Create(root, deployment("traced", 2))
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	traceID := span.SpanContext().TraceID()
	podKind, _ := schemas.ByResource("", "v1", "pods")
	testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
		objs, _, err := cp.Client.List(ctx, podKind, "default", nil)
		if err != nil {
			return err
		}
		bound := 0
		for _, o := range objs {
			if o.(*corev1.Pod).Spec.NodeName != "" {
				bound++
			}
		}
		if bound != 2 {
			return fmt.Errorf("%d of 2 pods bound", bound)
		}
		return nil
	})
	want := map[string]int{"create deployments": 1, "reconcile deployment-controller": 1, "create replicasets": 1,
		"reconcile replicaset-controller": 1, "create pods": 2, "schedule pod": 2, "create pods/binding": 2}
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		got := map[string]int{}
		parents := map[string]bool{}
		var names []string
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID() != traceID {
				continue
			}
			got[s.Name]++
			names = append(names, s.Name)
			parents[s.SpanContext.SpanID().String()] = true
		}
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID() == traceID && s.Name != "skiff apply" && !parents[s.Parent.SpanID().String()] {
				return fmt.Errorf("span %q has a parent outside the trace", s.Name)
			}
		}
		for name, n := range want {
			if got[name] < n {
				sort.Strings(names)
				return fmt.Errorf("trace has %d %q spans, want >= %d; spans: %s", got[name], name, n, strings.Join(names, ", "))
			}
		}
		return nil
	})
}
