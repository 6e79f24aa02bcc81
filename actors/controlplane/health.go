package controlplane

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/events"
)

// reportStoppedForGood records a Warning Event about the kube-system namespace (an actor is no
// API object; events of cluster-scoped objects land in default, as in Kubernetes) for an actor
// its supervisor gave up on, so `kubectl get events` shows why the process turned unhealthy.
func (cp *ControlPlane) reportStoppedForGood(actor, reason string) {
	cp.cfg.Logger.Error("actor stopped for good; /readyz and /livez now fail", "actor", actor, "reason", reason)
	go func() { // the supervisor calls this from its own goroutine: never block it on the API
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}
		events.New(cp.Client, "skiff-"+cp.identity, "").Eventf(ctx, ns, corev1.EventTypeWarning, "ActorStoppedForGood",
			"actor %s failed too often and was stopped for good: %s", actor, reason)
	}()
}
