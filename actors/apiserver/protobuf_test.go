package apiserver_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/schemastest"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

const protobufType = "application/vnd.kubernetes.protobuf"

func protobufOf(t *testing.T, obj runtime.Object) string {
	t.Helper()
	data, ok, err := schemas.EncodeProtobuf(obj)
	if err != nil || !ok {
		t.Fatalf("%T has no protobuf form (%v)", obj, err)
	}
	return string(data)
}

// stored is an object read back as JSON without what differs between two servers given the
// same body: identity, times, revisions and allocated addresses.
func stored(a api, path string) map[string]any {
	out := a.mustDo(200, "GET", path, "", "")
	m, _ := out["metadata"].(map[string]any)
	for _, f := range []string{"uid", "creationTimestamp", "resourceVersion"} {
		delete(m, f)
	}
	mf, _ := m["managedFields"].([]any)
	for _, e := range mf {
		delete(e.(map[string]any), "time")
	}
	if spec, ok := out["spec"].(map[string]any); ok && out["kind"] == "Service" {
		delete(spec, "clusterIP")
		delete(spec, "clusterIPs")
		ports, _ := spec["ports"].([]any)
		for _, p := range ports {
			delete(p.(map[string]any), "nodePort")
		}
	}
	return out
}

// Every object of the shared corpus, created from a protobuf body, is stored as the same
// object created from its JSON body.
func TestProtobufBodyStoresWhatJSONStores(t *testing.T) {
	viaJSON, _ := newAPI(t)
	viaPB, _ := newAPI(t)
	good := schemastest.GoodManifests(t)
	n := 0
	for _, file := range schemastest.Names(good) {
		docs, err := schemas.DecodeManifests(good[file])
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, d := range docs {
			k, _ := schemas.ByGVK(d.GVK)
			m, _ := meta.Accessor(d.Object)
			ns := ""
			if k.Namespaced {
				ns = m.GetNamespace()
				if ns == "" {
					ns = "default"
				}
			}
			body, err := schemas.EncodeJSON(d.Object)
			if err != nil {
				t.Fatal(err)
			}
			viaJSON.mustDo(201, "POST", apiclient.Path(k, ns, "", ""), "application/json", string(body))
			viaPB.mustDo(201, "POST", apiclient.Path(k, ns, "", ""), protobufType, protobufOf(t, d.Object))
			path := apiclient.Path(k, ns, m.GetName(), "")
			if a, b := stored(viaJSON, path), stored(viaPB, path); !reflect.DeepEqual(a, b) {
				t.Errorf("%s %s: from protobuf\n%v\nfrom JSON\n%v", file, path, b, a)
			}
			n++
		}
	}
	if n < 10 {
		t.Fatalf("only %d objects in the corpus", n)
	}
}

// A protobuf body that cannot be decoded, or is of another kind, is a 400 naming the problem;
// a custom resource, which has no protobuf form, refuses protobuf with 415. Nothing is written.
func TestProtobufBodyRefusalsWriteNothing(t *testing.T) {
	a, cp := newAPI(t)
	createWidgetCRD(t, a)
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	good := protobufOf(t, pod)
	cases := []struct {
		name, path, body, mention string
		code                      int
	}{
		{"truncated", podsPath, good[:len(good)-20], "Pod", 400},
		{"JSON sent as protobuf", podsPath, podJSON("p", ""), "protobuf", 400},
		{"another kind", podsPath, protobufOf(t, &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}}), "the body is a Service (v1) but the request is for Pod (v1)", 400},
		{"custom resource", widgetsPath, good, "accepted media types include: application/json", 415},
	}
	before := cp.Log.Rev()
	for _, c := range cases {
		code, out := a.do("POST", c.path, protobufType, c.body)
		if msg, _ := out["message"].(string); code != c.code || !strings.Contains(msg, c.mention) {
			t.Errorf("%s: want %d naming %q, got %d: %v", c.name, c.code, c.mention, code, out)
		}
	}
	if after := cp.Log.Rev(); after != before {
		t.Errorf("refused requests moved the log from %d to %d", before, after)
	}
	// fieldValidation has nothing to report for protobuf, which has no unknown fields.
	code, out, h := a.send("POST", podsPath+"?fieldValidation=Strict", protobufType, good)
	if code != 201 || get(out, "metadata", "name") != "p" || len(h.Values("Warning")) > 0 {
		t.Errorf("strict protobuf create: %d %v, warnings %v", code, out, h.Values("Warning"))
	}
}

// contentTypes records the Content-Type of every response a client gets.
type contentTypes struct {
	mu   sync.Mutex
	seen []string
	next http.RoundTripper
}

func (c *contentTypes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	// Errors are Status objects in JSON whatever was asked (client-go reads either): only
	// answers carrying objects are recorded.
	if err == nil && resp.StatusCode < 400 {
		c.mu.Lock()
		c.seen = append(c.seen, r.Method+" "+resp.Header.Get("Content-Type"))
		c.mu.Unlock()
	}
	return resp, err
}

func (c *contentTypes) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.seen
	c.seen = nil
	return out
}

// A typed clientset configured as Kubernetes' components configure theirs (protobuf) creates,
// reads, updates and sets the status of a pod, every answer in protobuf.
func TestClientGoProtobufPodLifecycle(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	rec := &contentTypes{}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: cp.URL(), ContentConfig: rest.ContentConfig{ContentType: protobufType},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pods := cs.CoreV1().Pods("default")
	created, err := pods.Create(ctx, newPod("pb"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.Status.Phase != corev1.PodPending || created.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Fatalf("created without metadata, Pending or defaults: %+v", created)
	}
	got, err := pods.Get(ctx, "pb", metav1.GetOptions{})
	if err != nil || got.ResourceVersion != created.ResourceVersion {
		t.Fatalf("get: %v %v", got, err)
	}
	got.Labels["tier"] = "web"
	updated, err := pods.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil || updated.Labels["tier"] != "web" || updated.ResourceVersion == got.ResourceVersion {
		t.Fatalf("update: %v %v", updated, err)
	}
	updated.Status.Phase = corev1.PodRunning
	updated.Status.PodIP = "10.1.2.3"
	updated.Labels["tier"] = "ignored by /status"
	running, err := pods.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil || running.Status.Phase != corev1.PodRunning || running.Status.PodIP != "10.1.2.3" || running.Labels["tier"] != "web" {
		t.Fatalf("status update: %v %v", running, err)
	}
	for _, seen := range rec.take() {
		if !strings.HasSuffix(seen, " "+protobufType) {
			t.Errorf("an answer not in protobuf: %s", seen)
		}
	}
	// Errors are still decoded (JSON Status) by the protobuf client.
	if _, err := pods.Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get of a missing pod: %v", err)
	}
}
