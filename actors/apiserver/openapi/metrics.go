package openapi

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/common"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/skiff-sh/skiff/schemas"
)

// The resource metrics API (metrics.k8s.io/v1beta1) is not a stored kind, so it is not in
// schemas.Kinds(); it is described here as kube-apiserver describes metrics-server's aggregated
// API: NodeMetrics and PodMetrics with get and list only (no watch).

// metricsScheme knows the metrics kinds alone (not the meta types AddToScheme would add to the
// group), so the definitions name only them as served in metrics.k8s.io.
var metricsScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypes(metricsv1beta1.SchemeGroupVersion, &metricsv1beta1.NodeMetrics{}, &metricsv1beta1.NodeMetricsList{},
		&metricsv1beta1.PodMetrics{}, &metricsv1beta1.PodMetricsList{})
	return s
}()

var metricsKinds = []*schemas.Kind{
	{GVK: metricsv1beta1.SchemeGroupVersion.WithKind("NodeMetrics"), Resource: "nodes",
		New: func() runtime.Object { return &metricsv1beta1.NodeMetrics{} }, NewList: func() runtime.Object { return &metricsv1beta1.NodeMetricsList{} }},
	{GVK: metricsv1beta1.SchemeGroupVersion.WithKind("PodMetrics"), Resource: "pods", Namespaced: true,
		New: func() runtime.Object { return &metricsv1beta1.PodMetrics{} }, NewList: func() runtime.Object { return &metricsv1beta1.PodMetricsList{} }},
}

// metricsRoutes are the get and list routes of a metrics kind; a list is not a watch, so it
// offers no watch media types.
func metricsRoutes(k *schemas.Kind) []common.Route {
	var out []common.Route
	for _, r := range kindRoutes(k) {
		rt := r.(*route)
		switch rt.meta["x-kubernetes-action"] {
		case "get":
			out = append(out, rt)
		case "list":
			rt.produces = jsonTypes
			out = append(out, rt)
		}
	}
	return out
}
