package validation

import (
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// semanticallyEqual agrees with apiequality.Semantic.DeepEqual on random pod specs, copies of
// them, and copies with one part refilled.
func TestSemanticallyEqualAgreesWithTheReflectiveWalk(t *testing.T) {
	filler := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(rand.Int63()), serializer.NewCodecFactory(runtime.NewScheme())).NilChance(0.3).NumElements(0, 2).MaxDepth(6)
	for i := range 300 {
		a := &corev1.PodSpec{}
		filler.Fill(a)
		b := a.DeepCopy()
		if !semanticallyEqual(a, b) {
			t.Fatalf("case %d: a spec and its copy are not equal", i)
		}
		switch i % 3 {
		case 0:
			filler.Fill(&b.Containers)
		case 1:
			filler.Fill(&b.Tolerations)
		case 2:
			filler.Fill(&b.NodeSelector)
		}
		if got, want := semanticallyEqual(a, b), apiequality.Semantic.DeepEqual(a, b); got != want {
			t.Fatalf("case %d: semanticallyEqual = %v, the reflective walk says %v", i, got, want)
		}
	}
}

// Specs that encode differently but mean the same are equal, as for the walk: a quantity in
// another format, an empty list for none.
func TestSemanticallyEqualLooksPastTheEncoding(t *testing.T) {
	a := &corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}
	b := a.DeepCopy()
	b.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1073741824")
	b.Tolerations = []corev1.Toleration{}
	if ab, _ := a.Marshal(); string(ab) == string(mustMarshal(t, b)) {
		t.Fatal("the case needs specs whose encodings differ")
	}
	if !semanticallyEqual(a, b) {
		t.Fatal(`memory "1Gi" and "1073741824" are one quantity`)
	}
	b.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1G")
	if semanticallyEqual(a, b) {
		t.Fatal(`memory "1Gi" and "1G" compared equal`)
	}
}

func mustMarshal(t *testing.T, s *corev1.PodSpec) []byte {
	t.Helper()
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
