package schemas_test

import (
	"bytes"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/schemas"
)

// The stripped JSON decodes to the same object less its managedFields; JSON without them, or
// that is not an object, comes back as it was.
func TestStripManagedFields(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1",
		Labels: map[string]string{"app": "<web>"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:ports":{}}}`)}}}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.5", Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	raw, err := json.Marshal(svc)
	if err != nil {
		t.Fatal(err)
	}
	out := schemas.StripManagedFields(raw)
	if bytes.Contains(out, []byte("managedFields")) || len(out) >= len(raw) {
		t.Fatalf("not stripped: %s", out)
	}
	var got corev1.Service
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := svc.DeepCopy()
	want.ManagedFields = nil
	if !equality.Semantic.DeepEqual(&got, want) {
		t.Fatalf("stripped object differs:\n got %+v\nwant %+v", got, want)
	}
	for _, same := range []string{`{"metadata":{"name":"a"}}`, `{"metadata":{"annotations":{"managedFields":"x"}}}`, `not json "managedFields"`} {
		if out := schemas.StripManagedFields([]byte(same)); string(out) != same {
			t.Errorf("%s became %s", same, out)
		}
	}
}
