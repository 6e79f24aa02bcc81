package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/bus/identity"
)

// A controller's pod create and the scheduler's bind of it, as the components of `skiff up`
// send them: over NATS to the apiserver actor, or in process (apiclient.Direct). cpu-us/req is
// the process's CPU time (the embedded NATS server's included) per request.
func BenchmarkCreateBind(b *testing.B) {
	for _, way := range []string{"nats", "direct"} {
		b.Run(way, func(b *testing.B) { benchCreateBind(b, way) })
	}
}

func benchCreateBind(b *testing.B, way string) {
	s, nc := benchServerConn(b)
	sys := actorkit.NewSystem()
	b.Cleanup(sys.Shutdown)
	if _, err := sys.Spawn("apiserver", NewActor(ActorConfig{Server: s, NATS: nc})); err != nil {
		b.Fatal(err)
	}
	client := func(role identity.Role) *apiclient.Client {
		subject := identity.ID{Role: role}.APISubject()
		if way == "direct" {
			return &apiclient.Client{T: apiclient.Direct{Server: s, Subject: subject}}
		}
		return &apiclient.Client{T: apiclient.NATS{Conn: nc, Subject: subject}}
	}
	ctrl, sched := client(identity.ControllerManager), client(identity.Scheduler)
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := ctrl.Raw(ctx, http.MethodGet, "/api/v1/namespaces/default", "", nil); err == nil {
			break
		} else if time.Now().After(deadline) {
			b.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The controller writes a typed pod through the client (its body and answer in the
	// client's wire format, decoded as the controller gets it); the scheduler's bind is JSON.
	pods, binds := make([]*corev1.Pod, b.N), make([][]byte, b.N)
	for i := range pods {
		name := fmt.Sprintf("web-%d", i)
		pods[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "skiff.local/httpecho:v1"}}}}
		binds[i], _ = json.Marshal(&corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}})
	}
	b.ResetTimer()
	before := cpuTime()
	for i := range pods {
		if _, err := ctrl.Create(ctx, pods[i]); err != nil {
			b.Fatal(err)
		}
		if _, err := sched.Raw(ctx, http.MethodPost, fmt.Sprintf("/api/v1/namespaces/default/pods/web-%d/binding", i), "application/json", binds[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(2*b.N), "cpu-us/req")
}
