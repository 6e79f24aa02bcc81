package informer_test

import (
	"testing"

	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// A kind served in two versions has one cache, of the version the log holds (autoscaling/v1
// HPAs are stored as v2), whichever version a component asks for first.
func TestOneInformerForAKindInTwoVersions(t *testing.T) {
	f := informer.NewFactory(openLog(t, statelog.Config{}))
	v1, _ := schemas.ByResource("autoscaling", "v1", "horizontalpodautoscalers")
	v2, _ := schemas.ByResource("autoscaling", "v2", "horizontalpodautoscalers")
	first := f.ForKind(v1, "")
	if f.ForKind(v2, "") != first || f.For("autoscaling", "horizontalpodautoscalers") != first {
		t.Fatal("the two versions of HorizontalPodAutoscaler got separate informers")
	}
	if got := first.Kind(); got != v2 {
		t.Fatalf("the informer caches %v, want the stored %v", got.GVK, v2.GVK)
	}
}
