package schemas_test

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas"
)

func TestTableRowsCarryObjectJSON(t *testing.T) {
	pods, _ := schemas.Lookup("pods")
	now := time.Now()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))}}
	tab := schemas.Table(pods, []runtime.Object{p}, now)
	if len(tab.Rows) != 1 || tab.Rows[0].Cells[0] != "web" || tab.Rows[0].Cells[4] != "60s" {
		t.Fatalf("%+v", tab.Rows)
	}
	var got struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(tab.Rows[0].Object.Raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != "Pod" || got.APIVersion != "v1" || got.Metadata.Namespace != "shop" {
		t.Errorf("row object %+v", got)
	}
	// The whole table serializes as kubectl expects it.
	b, err := json.Marshal(tab)
	if err != nil {
		t.Fatal(err)
	}
	var back metav1.Table
	if err := json.Unmarshal(b, &back); err != nil || back.Kind != "Table" || len(back.Rows) != 1 {
		t.Fatalf("%v %s", err, b)
	}
	if schemas.HumanDuration(3*time.Minute+2*time.Second) != "3m2s" {
		t.Error("HumanDuration")
	}
}

func TestDefaultValidateThroughFacade(t *testing.T) {
	old := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "3"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.7", Ports: []corev1.ServicePort{{Port: 80}}}}
	schemas.Default(old)
	if errs := schemas.Validate(old); len(errs) > 0 {
		t.Fatal(errs)
	}
	// A PUT that leaves out the allocated IP keeps it rather than failing as a change.
	next := &corev1.Service{ObjectMeta: old.ObjectMeta, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}}
	schemas.DefaultUpdate(next, old)
	if errs := schemas.ValidateUpdate(next, old); len(errs) > 0 || next.Spec.ClusterIP != "10.96.0.7" {
		t.Fatalf("%v %s", errs, next.Spec.ClusterIP)
	}
}
