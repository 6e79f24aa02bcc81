package apiserver

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/skiff-sh/skiff/actors/nodeapi"
	"github.com/skiff-sh/skiff/schemas"
)

// The resource metrics API (metrics.k8s.io/v1beta1, metrics-server's in Kubernetes) is answered
// from the nodes' latest cgroup samples, asked over NATS when a request comes (nodeapi): usage
// never enters the state log, and a read costs one request to each node it involves. Which
// nodes and pods exist, and their labels and namespaces, come from the state as for any read,
// so selectors and RBAC work as on nodes and pods.

var metricsGV = metricsv1beta1.SchemeGroupVersion

// metricsResources are the metrics in discovery.
var metricsResources = map[schema.GroupVersion][]metav1.APIResource{metricsGV: {
	{Name: "nodes", Kind: "NodeMetrics", Verbs: metav1.Verbs{"get", "list"}},
	{Name: "pods", Namespaced: true, Kind: "PodMetrics", Verbs: metav1.Verbs{"get", "list"}},
}}

// nodeMetricsTimeout bounds the wait for one node; a node that does not answer in time is left
// out, as metrics-server leaves out a node it could not scrape.
const nodeMetricsTimeout = 5 * time.Second

// serveResourceMetrics answers metrics.k8s.io; false when info is not in that group.
func (s *Server) serveResourceMetrics(w http.ResponseWriter, r *http.Request, info requestInfo) bool {
	if info.gv != metricsGV {
		return false
	}
	k, ok := schemas.ByResource("", "v1", info.resource)
	if !ok || (info.resource != "nodes" && info.resource != "pods") || info.subresource != "" || (info.namespace != "" && !k.Namespaced) {
		writeError(w, errNotServed)
		return true
	}
	gr := metricsGV.WithResource(map[string]string{"nodes": "nodemetrics", "pods": "podmetrics"}[info.resource]).GroupResource()
	if info.verb != "get" && info.verb != "list" {
		writeError(w, apierrors.NewMethodNotSupported(gr, info.verb))
		return true
	}
	if s.opts.NodeConn == nil {
		writeError(w, apierrors.NewServiceUnavailable("resource metrics are not served: this apiserver has no connection to the nodes"))
		return true
	}
	out, err := s.resourceMetrics(r.Context(), k, info, gr)
	if err != nil {
		writeError(w, err)
		return true
	}
	writeJSON(w, http.StatusOK, out)
	return true
}

func (s *Server) resourceMetrics(ctx context.Context, k *schemas.Kind, info requestInfo, gr schema.GroupResource) (any, error) {
	src := info
	src.gv = k.GVK.GroupVersion()
	var objs []runtime.Object
	if info.verb == "get" {
		obj, err := s.getObject(ctx, k, src)
		if apierrors.IsNotFound(err) {
			return nil, apierrors.NewNotFound(gr, info.name)
		}
		if err != nil {
			return nil, err
		}
		objs = []runtime.Object{obj}
	} else {
		var err error
		if objs, _, err = s.listObjects(ctx, k, src); err != nil {
			return nil, err
		}
	}
	nodes := map[string]bool{}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Node:
			nodes[o.Name] = true
		case *corev1.Pod:
			if o.Spec.NodeName != "" && o.Status.Phase == corev1.PodRunning {
				nodes[o.Spec.NodeName] = true
			}
		}
	}
	usage := s.askNodes(ctx, nodes)
	if info.resource == "nodes" {
		items := metricsOf(objs, func(o runtime.Object) (metricsv1beta1.NodeMetrics, bool) { return nodeMetrics(o.(*corev1.Node), usage) })
		if info.verb == "get" {
			return first(items, gr, info.name)
		}
		return &metricsv1beta1.NodeMetricsList{TypeMeta: metav1.TypeMeta{Kind: "NodeMetricsList", APIVersion: metricsGV.String()}, Items: items}, nil
	}
	byPod := containersByPod(usage)
	items := metricsOf(objs, func(o runtime.Object) (metricsv1beta1.PodMetrics, bool) { return podMetrics(o.(*corev1.Pod), byPod) })
	if info.verb == "get" {
		return first(items, gr, info.name)
	}
	return &metricsv1beta1.PodMetricsList{TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList", APIVersion: metricsGV.String()}, Items: items}, nil
}

// metricsOf is the metrics f makes of objs, leaving out those without figures.
func metricsOf[T any](objs []runtime.Object, f func(runtime.Object) (T, bool)) []T {
	out := []T{}
	for _, o := range objs {
		if m, ok := f(o); ok {
			out = append(out, m)
		}
	}
	return out
}

// first is a get's one item: not found when its node had no figures yet.
func first[T any](items []T, gr schema.GroupResource, name string) (any, error) {
	if len(items) == 0 {
		return nil, apierrors.NewNotFound(gr, name)
	}
	return &items[0], nil
}

// askNodes asks each node for its latest figures at once; a node that fails is left out.
func (s *Server) askNodes(ctx context.Context, nodes map[string]bool) map[string]nodeapi.MetricsReply {
	out := make(map[string]nodeapi.MetricsReply, len(nodes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for node := range nodes {
		wg.Go(func() {
			callCtx, cancel := context.WithTimeout(ctx, nodeMetricsTimeout)
			defer cancel()
			var rep nodeapi.MetricsReply
			if err := nodeapi.Call(callCtx, s.opts.NodeConn, nodeapi.MetricsSubject(node), nodeapi.MetricsRequest{}, &rep); err != nil {
				return
			}
			mu.Lock()
			out[node] = rep
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func nodeMetrics(n *corev1.Node, usage map[string]nodeapi.MetricsReply) (metricsv1beta1.NodeMetrics, bool) {
	u := usage[n.Name].Node
	if u == nil {
		return metricsv1beta1.NodeMetrics{}, false
	}
	return metricsv1beta1.NodeMetrics{
		TypeMeta:   metav1.TypeMeta{Kind: "NodeMetrics", APIVersion: metricsGV.String()},
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, CreationTimestamp: metav1.Now()},
		Timestamp:  metav1.NewTime(u.Timestamp), Window: metav1.Duration{Duration: u.Window},
		Usage: usageList(*u),
	}, true
}

func containersByPod(usage map[string]nodeapi.MetricsReply) map[string][]nodeapi.ContainerUsage {
	out := map[string][]nodeapi.ContainerUsage{}
	for _, rep := range usage {
		for _, c := range rep.Containers {
			out[c.PodUID] = append(out[c.PodUID], c)
		}
	}
	return out
}

// podMetrics has a pod's containers by name, timed by the newest of their samples; a pod
// with no container sampled twice yet has none, as metrics-server leaves it out.
func podMetrics(p *corev1.Pod, byPod map[string][]nodeapi.ContainerUsage) (metricsv1beta1.PodMetrics, bool) {
	cs := byPod[string(p.UID)]
	if len(cs) == 0 {
		return metricsv1beta1.PodMetrics{}, false
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
	m := metricsv1beta1.PodMetrics{
		TypeMeta:   metav1.TypeMeta{Kind: "PodMetrics", APIVersion: metricsGV.String()},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, CreationTimestamp: metav1.Now()},
	}
	for _, c := range cs {
		if c.Timestamp.After(m.Timestamp.Time) {
			m.Timestamp, m.Window = metav1.NewTime(c.Timestamp), metav1.Duration{Duration: c.Window}
		}
		m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name, Usage: usageList(c.Usage)})
	}
	return m, true
}

// usageList writes CPU in nanocores and memory in bytes, as metrics-server does.
func usageList(u nodeapi.Usage) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewScaledQuantity(int64(u.CPUNanoCores), resource.Nano),
		corev1.ResourceMemory: *resource.NewQuantity(int64(u.MemoryBytes), resource.BinarySI),
	}
}
