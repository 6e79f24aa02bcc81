package endpoints

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
)

func (c *controller) sync(ctx context.Context, key string) error {
	ns, name := controllerkit.SplitKey(key)
	cur, exists := c.eps.Get(ns, name)
	o, ok := c.svcs.Get(ns, name)
	if !ok {
		if !exists {
			return nil
		}
		// The Service is gone: so are its Endpoints, as Kubernetes' controller does.
		uid := cur.(*corev1.Endpoints).UID
		err := c.client.Delete(ctx, endpointsKind, ns, name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	svc := o.(*corev1.Service)
	if svc.Spec.Selector == nil {
		return nil // the user's Endpoints
	}
	want := c.desired(svc)
	if !exists {
		_, err := c.client.Create(ctx, want)
		if apierrors.IsAlreadyExists(err) {
			return nil // the cache was behind; its add event requeues the key
		}
		return err
	}
	ep := cur.(*corev1.Endpoints)
	if apiequality.Semantic.DeepEqual(ep.Subsets, want.Subsets) && apiequality.Semantic.DeepEqual(ep.Labels, want.Labels) &&
		ep.Annotations[corev1.EndpointsOverCapacity] == want.Annotations[corev1.EndpointsOverCapacity] {
		return nil
	}
	next := ep.DeepCopy()
	next.Subsets, next.Labels = want.Subsets, want.Labels
	if v, ok := want.Annotations[corev1.EndpointsOverCapacity]; ok {
		metav1.SetMetaDataAnnotation(&next.ObjectMeta, corev1.EndpointsOverCapacity, v)
	} else {
		delete(next.Annotations, corev1.EndpointsOverCapacity)
	}
	_, err := c.client.Update(ctx, next)
	return err
}

// desired folds the Service's slices into subsets: one per distinct port list, addresses
// sorted by IP, ready ones apart from not-ready ones; terminating endpoints are left out
// unless the Service publishes not-ready addresses.
func (c *controller) desired(svc *corev1.Service) *corev1.Endpoints {
	subsets := map[string]*corev1.EndpointSubset{}
	for _, o := range c.slices.ByIndex(informer.IndexControllerUID, string(svc.UID)) {
		s := o.(*discoveryv1.EndpointSlice)
		if !isOurs(s, svc) || s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		ports := endpointPorts(s.Ports)
		k := portsKey(ports)
		ss := subsets[k]
		if ss == nil {
			ss = &corev1.EndpointSubset{Ports: ports}
			subsets[k] = ss
		}
		for _, e := range s.Endpoints {
			addEndpoint(ss, e, svc.Spec.PublishNotReadyAddresses)
		}
	}
	keys := make([]string, 0, len(subsets))
	for k, ss := range subsets {
		if len(ss.Addresses)+len(ss.NotReadyAddresses) > 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace, Labels: endpointsLabels(svc)}}
	budget := MaxAddresses
	for _, k := range keys {
		ss := subsets[k]
		byIP := func(a []corev1.EndpointAddress) { sort.Slice(a, func(i, j int) bool { return a[i].IP < a[j].IP }) }
		byIP(ss.Addresses)
		byIP(ss.NotReadyAddresses)
		ss.Addresses, budget = truncate(ss.Addresses, budget)
		ss.NotReadyAddresses, budget = truncate(ss.NotReadyAddresses, budget)
		ep.Subsets = append(ep.Subsets, *ss)
	}
	if budget < 0 {
		metav1.SetMetaDataAnnotation(&ep.ObjectMeta, corev1.EndpointsOverCapacity, "truncated")
	}
	return ep
}

// truncate keeps what fits in budget; a negative remainder says something was left out.
func truncate(a []corev1.EndpointAddress, budget int) ([]corev1.EndpointAddress, int) {
	if len(a) <= max(budget, 0) {
		return a, budget - len(a)
	}
	return a[:max(budget, 0)], -1
}

func addEndpoint(ss *corev1.EndpointSubset, e discoveryv1.Endpoint, publishNotReady bool) {
	if len(e.Addresses) == 0 || (ptr.Deref(e.Conditions.Terminating, false) && !publishNotReady) {
		return
	}
	a := corev1.EndpointAddress{IP: e.Addresses[0], Hostname: ptr.Deref(e.Hostname, ""), NodeName: e.NodeName}
	if e.TargetRef != nil {
		a.TargetRef = e.TargetRef.DeepCopy()
	}
	if ptr.Deref(e.Conditions.Ready, false) || publishNotReady {
		ss.Addresses = append(ss.Addresses, a)
	} else {
		ss.NotReadyAddresses = append(ss.NotReadyAddresses, a)
	}
}

func endpointPorts(ports []discoveryv1.EndpointPort) []corev1.EndpointPort {
	var out []corev1.EndpointPort
	for _, p := range ports {
		out = append(out, corev1.EndpointPort{Name: ptr.Deref(p.Name, ""), Port: ptr.Deref(p.Port, 0),
			Protocol: ptr.Deref(p.Protocol, corev1.ProtocolTCP), AppProtocol: p.AppProtocol})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func portsKey(ports []corev1.EndpointPort) string {
	var b strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&b, "%s/%s/%d,", p.Name, p.Protocol, p.Port)
	}
	return b.String()
}

// endpointsLabels are the Service's labels, plus the headless label for a Service without a
// cluster IP, as in Kubernetes.
func endpointsLabels(svc *corev1.Service) map[string]string {
	out := map[string]string{}
	for k, v := range svc.Labels {
		out[k] = v
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		out[corev1.IsHeadlessService] = ""
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
