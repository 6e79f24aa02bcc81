package events_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/events"
)

func TestRecorderCorrelatesAsKubernetes(t *testing.T) {
	cp := ct.Start(t)
	ctx := ct.Ctx(t)
	rs := ct.ReplicaSet("web", "web", 40)
	rs.UID = "rs-uid"
	rs.Namespace = "default"
	rec := events.New(cp.Client, "replicaset-controller", "")

	// The same event twice is one object with count 2.
	rec.Eventf(ctx, rs, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: web-a")
	rec.Eventf(ctx, rs, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: web-a")
	deletes := about(t, cp, "SuccessfulDelete")
	if len(deletes) != 1 || deletes[0].Count != 2 {
		t.Fatalf("a repeated event: %d objects, want one with count 2: %+v", len(deletes), deletes)
	}

	// 40 creates of a ReplicaSet: 9 on their own, then one combined event counting the
	// rest, until the object's burst of 25 writes (2 spent above) is spent.
	for i := range 40 {
		rec.Eventf(ctx, rs, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: web-%d", i)
	}
	creates := about(t, cp, "SuccessfulCreate")
	var combined *corev1.Event
	for _, e := range creates {
		if strings.HasPrefix(e.Message, "(combined from similar events)") {
			combined = e
		}
	}
	if len(creates) != 10 || combined == nil {
		t.Fatalf("%d SuccessfulCreate events (combined: %v), want 9 and one combined", len(creates), combined != nil)
	}
	if combined.Count != 25-2-9 {
		t.Fatalf("the combined event counts %d, want %d: the burst of 25 writes less the 11 before it", combined.Count, 25-2-9)
	}
}

// about lists the Events of a reason in namespace default.
func about(t *testing.T, cp *controlplane.ControlPlane, reason string) []*corev1.Event {
	t.Helper()
	objs, _, err := cp.Client.List(context.Background(), controllerkit.MustKind("", "events"), "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []*corev1.Event
	for _, o := range objs {
		if e := o.(*corev1.Event); e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}
