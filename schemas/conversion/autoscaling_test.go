package conversion_test

import (
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/schemas/conversion"
)

// A v2 HPA with what v1 has no field for survives v2 → v1 → v2 unchanged, and v1 shows the cpu
// target and current utilization in its own fields.
func TestHPARoundTripsThroughV1(t *testing.T) {
	now := metav1.Now().Rfc3339Copy()
	in := &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{"team": "a"}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To(int32(2)), MaxReplicas: 9,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("100Mi"))}}},
				{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: corev1.ResourceCPU, Container: "app",
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(50))}}},
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(70))}}},
			},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(int32(30))}},
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			ObservedGeneration: ptr.To(int64(3)), LastScaleTime: &now, CurrentReplicas: 3, DesiredReplicas: 4,
			CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
				Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To(int32(65)), AverageValue: ptr.To(resource.MustParse("130m"))}}}},
			Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue,
				LastTransitionTime: now, Reason: "ReadyForNewScale", Message: "recommended size matches current size"}},
		},
	}
	orig := in.DeepCopy()
	v1, err := conversion.HPAToV1(in)
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(in, orig) {
		t.Fatal("HPAToV1 modified its input")
	}
	if v1.APIVersion != "autoscaling/v1" || ptr.Deref(v1.Spec.TargetCPUUtilizationPercentage, 0) != 70 || ptr.Deref(v1.Status.CurrentCPUUtilizationPercentage, 0) != 65 ||
		v1.Annotations["team"] != "a" || len(v1.Annotations) != 5 {
		t.Fatalf("v1: %+v %+v annotations %v", v1.Spec, v1.Status, v1.Annotations)
	}
	back, err := conversion.HPAToV2(v1)
	if err != nil {
		t.Fatal(err)
	}
	// The cpu utilization metric returns after the others, as kube's conversion orders it.
	if !apiequality.Semantic.DeepEqual(back, orig) {
		t.Fatalf("v2 → v1 → v2 changed the object:\n got %+v\nwant %+v", back, orig)
	}
}

// A v1 HPA without a cpu target gets v1's implicit 80%, as kube converts it.
func TestV1WithoutTargetIsEightyPercentCPU(t *testing.T) {
	v2, err := conversion.HPAToV2(&autoscalingv1.HorizontalPodAutoscaler{Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if len(v2.Spec.Metrics) != 1 || v2.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU || *v2.Spec.Metrics[0].Resource.Target.AverageUtilization != 80 {
		t.Fatalf("metrics %+v", v2.Spec.Metrics)
	}
	if _, err := conversion.HPAToV2(&autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		conversion.MetricSpecsAnnotation: "not json"}}}); err == nil {
		t.Fatal("a malformed metrics annotation converted")
	}
}
