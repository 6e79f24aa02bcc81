package endpointslice

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
)

// group is the endpoints that share an address type and a resolved port list: one or more
// slices.
type group struct {
	addressType discoveryv1.AddressType
	ports       []discoveryv1.EndpointPort
	endpoints   []discoveryv1.Endpoint
}

func (c *controller) sync(ctx context.Context, key string) error {
	ns, name := controllerkit.SplitKey(key)
	o, ok := c.svcs.Get(ns, name)
	if !ok {
		return nil // the garbage collector removes the slices with their owner
	}
	svc := o.(*corev1.Service)
	if len(svc.Spec.Selector) == 0 {
		return nil // slices of a selector-less Service are the user's
	}
	if !c.exp.Satisfied(key) {
		return nil // the awaited slice events requeue the Service
	}
	var existing []*discoveryv1.EndpointSlice
	for _, o := range c.slices.ByIndex(informer.IndexControllerUID, string(svc.UID)) {
		if s := o.(*discoveryv1.EndpointSlice); ownedBy(s, svc) {
			existing = append(existing, s)
		}
	}
	want := c.desired(svc)
	used := map[*discoveryv1.EndpointSlice]bool{}
	pick := func(w *discoveryv1.EndpointSlice, samePorts bool) *discoveryv1.EndpointSlice {
		for _, s := range existing {
			if !used[s] && s.AddressType == w.AddressType && (!samePorts || apiequality.Semantic.DeepEqual(s.Ports, w.Ports)) {
				used[s] = true
				return s
			}
		}
		return nil
	}
	var errs []error
	var pending []*discoveryv1.EndpointSlice
	for _, w := range want {
		if s := pick(w, true); s != nil {
			errs = append(errs, c.update(ctx, s, w))
		} else {
			pending = append(pending, w)
		}
	}
	for _, w := range pending {
		if s := pick(w, false); s != nil {
			errs = append(errs, c.update(ctx, s, w))
			continue
		}
		c.exp.ExpectCreations(key, 1)
		if _, err := c.client.Create(ctx, w); err != nil {
			c.exp.CreationObserved(key)
			errs = append(errs, err)
		}
	}
	kind := controllerkit.MustKind("discovery.k8s.io", "endpointslices")
	for _, s := range existing {
		if used[s] {
			continue
		}
		uid := s.UID
		c.exp.ExpectDeletions(key, []string{controllerkit.KeyOf(s)})
		err := c.client.Delete(ctx, kind, s.Namespace, s.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil {
			c.exp.DeletionObserved(key, controllerkit.KeyOf(s))
			if !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (c *controller) update(ctx context.Context, cur, want *discoveryv1.EndpointSlice) error {
	if apiequality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) && apiequality.Semantic.DeepEqual(cur.Ports, want.Ports) &&
		apiequality.Semantic.DeepEqual(cur.Labels, want.Labels) {
		return nil
	}
	next := cur.DeepCopy()
	next.Endpoints, next.Ports, next.Labels = want.Endpoints, want.Ports, want.Labels
	_, err := c.client.Update(ctx, next)
	return err
}

// desired computes the slices svc should have (unnamed: new ones get a generated name).
func (c *controller) desired(svc *corev1.Service) []*discoveryv1.EndpointSlice {
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	var pods []*corev1.Pod
	for _, p := range controllerkit.Pods(c.pods.ByIndex(informer.IndexNamespace, svc.Namespace)) {
		if p.Status.PodIP != "" && sel.Matches(labels.Set(p.Labels)) && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			pods = append(pods, p)
		}
	}
	groups := map[string]*group{}
	for _, p := range pods {
		ports := resolvePorts(svc, p)
		at := discoveryv1.AddressTypeIPv4
		if strings.Contains(p.Status.PodIP, ":") {
			at = discoveryv1.AddressTypeIPv6
		}
		k := string(at) + "|" + portsKey(ports)
		g := groups[k]
		if g == nil {
			g = &group{addressType: at, ports: ports}
			groups[k] = g
		}
		g.endpoints = append(g.endpoints, endpointFor(svc, p))
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []*discoveryv1.EndpointSlice
	for _, k := range keys {
		g := groups[k]
		sort.Slice(g.endpoints, func(i, j int) bool { return g.endpoints[i].Addresses[0] < g.endpoints[j].Addresses[0] })
		for i := 0; i < len(g.endpoints); i += MaxEndpointsPerSlice {
			out = append(out, newSlice(svc, g.addressType, g.ports, g.endpoints[i:min(i+MaxEndpointsPerSlice, len(g.endpoints))]))
		}
	}
	if len(out) == 0 { // an empty placeholder says "selected, nothing ready", as in Kubernetes
		out = append(out, newSlice(svc, discoveryv1.AddressTypeIPv4, nil, nil))
	}
	return out
}

func newSlice(svc *corev1.Service, at discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps []discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	lbls := map[string]string{}
	for k, v := range svc.Labels {
		lbls[k] = v
	}
	lbls[discoveryv1.LabelServiceName] = svc.Name
	lbls[discoveryv1.LabelManagedBy] = ManagedBy
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: svc.Name + "-", Namespace: svc.Namespace, Labels: lbls,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, svcGVK)},
		},
		AddressType: at,
		Ports:       ports,
		Endpoints:   append([]discoveryv1.Endpoint(nil), eps...),
	}
}

func endpointFor(svc *corev1.Service, p *corev1.Pod) discoveryv1.Endpoint {
	terminating := p.DeletionTimestamp != nil
	serving := controllerkit.IsPodReady(p) || svc.Spec.PublishNotReadyAddresses
	ep := discoveryv1.Endpoint{
		Addresses: []string{p.Status.PodIP},
		Conditions: discoveryv1.EndpointConditions{
			Ready: ptr.To(serving && !terminating), Serving: ptr.To(serving), Terminating: ptr.To(terminating),
		},
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
	}
	if p.Spec.NodeName != "" {
		ep.NodeName = ptr.To(p.Spec.NodeName)
	}
	if p.Spec.Hostname != "" && p.Spec.Subdomain == svc.Name && svc.Spec.ClusterIP == corev1.ClusterIPNone {
		ep.Hostname = ptr.To(p.Spec.Hostname)
	}
	return ep
}

// resolvePorts maps each Service port to the pod's port: a number as is, a name through the
// pod's container ports (a port the pod does not declare is left out for that pod).
func resolvePorts(svc *corev1.Service, p *corev1.Pod) []discoveryv1.EndpointPort {
	var out []discoveryv1.EndpointPort
	for _, sp := range svc.Spec.Ports {
		proto := sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		port, ok := targetPort(sp, proto, p)
		if !ok {
			continue
		}
		out = append(out, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Protocol: ptr.To(proto), Port: ptr.To(port), AppProtocol: sp.AppProtocol})
	}
	return out
}

func targetPort(sp corev1.ServicePort, proto corev1.Protocol, p *corev1.Pod) (int32, bool) {
	tp := sp.TargetPort
	switch {
	case tp.Type == intstr.Int && tp.IntVal == 0:
		return sp.Port, true
	case tp.Type == intstr.Int:
		return tp.IntVal, true
	}
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			cpProto := cp.Protocol
			if cpProto == "" {
				cpProto = corev1.ProtocolTCP
			}
			if cp.Name == tp.StrVal && cpProto == proto {
				return cp.ContainerPort, true
			}
		}
	}
	return 0, false
}

func portsKey(ports []discoveryv1.EndpointPort) string {
	var b strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&b, "%s/%s/%d,", ptr.Deref(p.Name, ""), ptr.Deref(p.Protocol, ""), ptr.Deref(p.Port, 0))
	}
	return b.String()
}
