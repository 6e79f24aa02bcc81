package logvalue_test

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/schemas/logvalue"
)

// BenchmarkPodEncodeDecode is one write and one read of a running pod's log value (managed
// fields, status, conditions): as the JSON Skiff stored before, and as its protobuf now.
func BenchmarkPodEncodeDecode(b *testing.B) {
	pods := kind(b, "", "v1", "pods")
	pod := realisticPod(7)
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, err := json.Marshal(pod)
			if err != nil {
				b.Fatal(err)
			}
			var p corev1.Pod
			if err := json.Unmarshal(v, &p); err != nil {
				b.Fatal(err)
			}
		}
		v, _ := json.Marshal(pod)
		b.ReportMetric(float64(len(v)), "value-bytes")
	})
	b.Run("protobuf", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, err := logvalue.Encode(pod)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := logvalue.Decode(pods, v, 1); err != nil {
				b.Fatal(err)
			}
		}
		v, _ := logvalue.Encode(pod)
		b.ReportMetric(float64(len(v)), "value-bytes")
	})
}
