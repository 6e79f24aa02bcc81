package apiclient_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/apiwire"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// recording passes requests to a real transport and notes, per request, the body's type and
// whether the answer came in protobuf.
type recording struct {
	next apiclient.Transport
	mu   sync.Mutex
	seen []string
}

func (r *recording) Do(ctx context.Context, req apiwire.Request) (apiwire.Response, error) {
	resp, err := r.next.Do(ctx, req)
	answer := "json"
	if bytes.HasPrefix(resp.Body, []byte("k8s\x00")) {
		answer = "protobuf"
	}
	r.mu.Lock()
	r.seen = append(r.seen, fmt.Sprintf("%s %s -> %d %s", req.Method, req.ContentType, resp.Code, answer))
	r.mu.Unlock()
	return resp, err
}

func (r *recording) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.seen
	r.seen = nil
	return out
}

// Over each transport the client writes built-in kinds in protobuf and takes its answers in
// protobuf; patches stay JSON, and errors still arrive as API errors.
func TestClientSpeaksProtobufForBuiltInKinds(t *testing.T) {
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) { c.Components = []string{controlplane.APIServer} })
	transports := map[string]apiclient.Transport{
		"direct": apiclient.Direct{Server: cp.API},
		"nats":   apiclient.NATS{Conn: cp.Conn},
		"http":   apiclient.HTTP{Server: cp.URL()},
	}
	pods, _ := schemas.ByResource("", "v1", "pods")
	for name, tr := range transports {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rec := &recording{next: tr}
			c := &apiclient.Client{T: rec}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pb-" + name, Namespace: "default"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
			obj, err := c.Create(ctx, pod)
			if err != nil {
				t.Fatal(err)
			}
			created := obj.(*corev1.Pod)
			if created.UID == "" || created.Status.Phase != corev1.PodPending || created.Kind != "Pod" {
				t.Fatalf("created: %+v", created)
			}
			created.Labels = map[string]string{"tier": "web"}
			obj, err = c.Update(ctx, created)
			if err != nil || obj.(*corev1.Pod).Labels["tier"] != "web" {
				t.Fatalf("update: %v %v", obj, err)
			}
			running := obj.(*corev1.Pod)
			running.Status.Phase = corev1.PodRunning
			if obj, err = c.UpdateStatus(ctx, running); err != nil || obj.(*corev1.Pod).Status.Phase != corev1.PodRunning {
				t.Fatalf("status update: %v %v", obj, err)
			}
			running = obj.(*corev1.Pod)
			running.Status.PodIP = "10.0.0.9"
			if err := c.PutStatus(ctx, running); err != nil {
				t.Fatal(err)
			}
			if obj, err = c.Get(ctx, pods, "default", "pb-"+name); err != nil || obj.(*corev1.Pod).Status.PodIP != "10.0.0.9" {
				t.Fatalf("get: %v %v", obj, err)
			}
			if _, err := c.Patch(ctx, pods, "default", "pb-"+name, "", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"tier":"db"}}}`)); err != nil {
				t.Fatal(err)
			}
			// A create answered by its metadata alone: the name given, as stored.
			meta, err := c.CreateMeta(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-", Namespace: "default", Labels: map[string]string{"a": "b"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}})
			if err != nil {
				t.Fatal(err)
			}
			if obj, err = c.Get(ctx, pods, "default", meta.Name); err != nil || obj.(*corev1.Pod).UID != meta.UID || meta.UID == "" ||
				meta.ResourceVersion != obj.(*corev1.Pod).ResourceVersion || meta.Labels["a"] != "b" {
				t.Fatalf("created %+v; get: %v %v", meta, obj, err)
			}
			want := []string{
				"POST application/vnd.kubernetes.protobuf -> 201 protobuf",
				"PUT application/vnd.kubernetes.protobuf -> 200 protobuf",
				"PUT application/vnd.kubernetes.protobuf -> 200 protobuf",
				"PUT application/vnd.kubernetes.protobuf -> 200 protobuf",
				"GET  -> 200 protobuf",
				"PATCH application/merge-patch+json -> 200 protobuf",
				"POST application/vnd.kubernetes.protobuf -> 201 protobuf",
				"GET  -> 200 protobuf",
			}
			if got := rec.take(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("requests:\n%q\nwant\n%q", got, want)
			}
			if _, err := c.Get(ctx, pods, "default", "missing"); !apierrors.IsNotFound(err) {
				t.Errorf("get of a missing pod: %v", err)
			}
		})
	}
}
