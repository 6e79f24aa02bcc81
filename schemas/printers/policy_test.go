package printers_test

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-sh/skiff/schemas/printers"
)

func TestPodDisruptionBudgetAndEndpointsRows(t *testing.T) {
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: ago(time.Hour)},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromString("50%"))}, Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 2}}
	tab := printers.Table("poddisruptionbudgets", []runtime.Object{pdb}, now)
	if got, want := names(tab, true), []string{"Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("columns %v; want %v", got, want)
	}
	if got, want := tab.Rows[0].Cells, []any{"web", "50%", "N/A", int64(2), "60m"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("row %v; want %v", got, want)
	}
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: ago(time.Minute)}, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}},
		Ports:     []corev1.EndpointPort{{Name: "a", Port: 80}, {Name: "b", Port: 443}},
	}}}
	row := printers.Table("endpoints", []runtime.Object{ep}, now).Rows[0].Cells
	if want := []any{"web", "10.0.0.1:80,10.0.0.1:443,10.0.0.2:80 + 1 more...", "60s"}; !reflect.DeepEqual(row, want) {
		t.Fatalf("endpoints row %v; want %v", row, want)
	}
	if row := printers.Table("endpoints", []runtime.Object{&corev1.Endpoints{}}, now).Rows[0].Cells; row[1] != "<none>" {
		t.Fatalf("empty endpoints: %v", row)
	}
}
