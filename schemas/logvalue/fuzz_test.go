package logvalue_test

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/logvalue"
)

// FuzzDecode: whatever a log value holds, reading it never panics; a value that reads as a
// Pod is stored again as the same Pod, and its metadata and node read alone as decoded whole.
func FuzzDecode(f *testing.F) {
	pod := realisticPod(5)
	pb, err := logvalue.Encode(pod)
	if err != nil {
		f.Fatal(err)
	}
	js, err := json.Marshal(pod)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(pb)
	f.Add(js)
	f.Add(pb[:40])
	f.Add([]byte("k8s\x00"))
	f.Add([]byte(`{"metadata":{"name":"p"},"spec":{"nodeName":"n"}}`))
	pods := kind(f, "", "v1", "pods")
	f.Fuzz(func(t *testing.T, value []byte) {
		m, metaErr := logvalue.Meta(value)
		node, nodeErr := logvalue.PodNodeName(value)
		obj, err := logvalue.Decode(pods, value, 1)
		if err != nil {
			return
		}
		again, err := logvalue.Encode(obj)
		if err != nil {
			t.Fatalf("a decoded pod does not encode: %v", err)
		}
		back, err := logvalue.Decode(pods, again, 1)
		if err != nil {
			t.Fatalf("a pod's own value does not decode: %v", err)
		}
		if !apiequality.Semantic.DeepEqual(obj, back) {
			t.Fatalf("a decoded pod changes when stored again")
		}
		if !schemas.IsProtobuf(value) {
			return // JSON may name fields case-insensitively or twice; the peeks read it as json does
		}
		p := obj.(*corev1.Pod)
		if metaErr != nil || m.Name != p.Name || m.UID != p.UID || len(m.ManagedFields) != len(p.ManagedFields) {
			t.Fatalf("Meta read %v, %v; the decoded pod has %q", m, metaErr, p.Name)
		}
		if nodeErr != nil || node != p.Spec.NodeName {
			t.Fatalf("PodNodeName read %q, %v; the decoded pod has %q", node, nodeErr, p.Spec.NodeName)
		}
	})
}
