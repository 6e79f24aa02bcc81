package schemas

import (
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	conversionapi "k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas/conversion"
)

var hpaStoredAsV2 = &StoredAs{
	GVK: autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler"),
	ToStored: func(o runtime.Object) (runtime.Object, error) {
		h, ok := o.(*autoscalingv1.HorizontalPodAutoscaler)
		if !ok {
			return nil, fmt.Errorf("%T is not an autoscaling/v1 HorizontalPodAutoscaler", o)
		}
		return conversion.HPAToV2(h)
	},
	FromStored: func(o runtime.Object) (runtime.Object, error) {
		h, ok := o.(*autoscalingv2.HorizontalPodAutoscaler)
		if !ok {
			return nil, fmt.Errorf("%T is not an autoscaling/v2 HorizontalPodAutoscaler", o)
		}
		return conversion.HPAToV1(h)
	},
}

// registerStoredAsConversions teaches the scheme the conversions, so what converts objects by
// version through it (the field manager, for managedFields entries of the other version) can.
func registerStoredAsConversions(s *runtime.Scheme) error {
	if err := s.AddConversionFunc((*autoscalingv1.HorizontalPodAutoscaler)(nil), (*autoscalingv2.HorizontalPodAutoscaler)(nil),
		func(a, b any, _ conversionapi.Scope) error {
			v2, err := conversion.HPAToV2(a.(*autoscalingv1.HorizontalPodAutoscaler))
			if err == nil {
				*b.(*autoscalingv2.HorizontalPodAutoscaler) = *v2
			}
			return err
		}); err != nil {
		return err
	}
	return s.AddConversionFunc((*autoscalingv2.HorizontalPodAutoscaler)(nil), (*autoscalingv1.HorizontalPodAutoscaler)(nil),
		func(a, b any, _ conversionapi.Scope) error {
			v1, err := conversion.HPAToV1(a.(*autoscalingv2.HorizontalPodAutoscaler))
			if err == nil {
				*b.(*autoscalingv1.HorizontalPodAutoscaler) = *v1
			}
			return err
		})
}

// Stored is the kind k's objects are stored as: k itself, or the version named by StoredAs.
func Stored(k *Kind) *Kind {
	if k.StoredAs == nil {
		return k
	}
	if s, ok := ByGVK(k.StoredAs.GVK); ok {
		return s
	}
	panic("schemas: " + k.GVK.String() + " is stored as unserved " + k.StoredAs.GVK.String())
}
