package schemas

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// Scheme knows every served kind plus the bodies of subresources (Binding, Scale) and the meta
// types (Status, DeleteOptions, Table, ...). Its groups hold more types than Skiff serves: serving
// is decided by Kinds(), not by the scheme.
var Scheme = runtime.NewScheme()

// Codecs encodes and decodes with Scheme.
var Codecs serializer.CodecFactory

// ParameterCodec converts query parameters (ListOptions, DeleteOptions) with Scheme.
var ParameterCodec runtime.ParameterCodec

func init() {
	utilruntime.Must(corev1.AddToScheme(Scheme))
	utilruntime.Must(appsv1.AddToScheme(Scheme))
	utilruntime.Must(batchv1.AddToScheme(Scheme))
	utilruntime.Must(autoscalingv2.AddToScheme(Scheme))
	utilruntime.Must(discoveryv1.AddToScheme(Scheme))
	utilruntime.Must(coordinationv1.AddToScheme(Scheme))
	utilruntime.Must(autoscalingv1.AddToScheme(Scheme))
	utilruntime.Must(rbacv1.AddToScheme(Scheme))
	utilruntime.Must(policyv1.AddToScheme(Scheme)) // PodDisruptionBudget and the Eviction body
	utilruntime.Must(storagev1.AddToScheme(Scheme))
	utilruntime.Must(networkingv1.AddToScheme(Scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(Scheme))
	// The meta types (Status, DeleteOptions, ListOptions, Table) in meta.k8s.io/v1 and as
	// unversioned options in every group version.
	utilruntime.Must(metav1.AddMetaToScheme(Scheme))
	metav1.AddToGroupVersion(Scheme, metav1.SchemeGroupVersion)
	utilruntime.Must(registerStoredAsConversions(Scheme))
	Codecs = serializer.NewCodecFactory(Scheme)
	ParameterCodec = runtime.NewParameterCodec(Scheme)
}
