package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/bus/lease"
	"github.com/skiff-sh/skiff/schemas"
)

// The `kubernetes` Service in `default`, kept by the apiservers as kube-apiserver's lease
// endpoint reconciler keeps it: each replica announces its address in the leases bucket and
// renews it; every replica writes the Service and an EndpointSlice of the live announcements,
// so a replica that dies drops out within the lease TTL.
const (
	APIEndpoints       = "apiserver-endpoints" // the actor
	kubernetesService  = "kubernetes"
	endpointsPrefix    = "apiserver-endpoints" // announcements in the leases bucket
	DefaultEndpointTTL = 15 * time.Second      // kube's master lease TTL
)

type endpoint struct {
	IP   string `json:"ip"`
	Port int32  `json:"port"`
}

// advertised is this replica's address as pods reach it: AdvertiseAddress, else the listen IP
// when it is a specific one, else the host's default-route address (as kube picks).
func (cp *ControlPlane) advertised() (endpoint, error) {
	_, portStr, err := net.SplitHostPort(cp.listener.Addr().String())
	if err != nil {
		return endpoint{}, err
	}
	port, _ := strconv.Atoi(portStr)
	ip := cp.cfg.AdvertiseAddress
	if ip == "" {
		host, _, _ := net.SplitHostPort(cp.cfg.Listen)
		if a, err := netip.ParseAddr(host); err == nil && !a.IsUnspecified() && !a.IsLoopback() {
			ip = a.String()
		}
	}
	if ip == "" {
		chosen, err := utilnet.ChooseHostInterface()
		if err != nil {
			// A host without a default route (a sandbox): pods on it can still reach the host
			// by its loopback only through hostNetwork; say so rather than refuse to start.
			cp.cfg.Logger.Warn("kubernetes service: no default-route address; advertising 127.0.0.1 (set --advertise-address)", "err", err)
			chosen = net.IPv4(127, 0, 0, 1)
		}
		ip = chosen.String()
	}
	if a, err := netip.ParseAddr(ip); err != nil || !a.Is4() {
		return endpoint{}, fmt.Errorf("AdvertiseAddress (--advertise-address) %q: must be an IPv4 address", ip)
	}
	return endpoint{IP: ip, Port: int32(port)}, nil
}

// startAPIEndpoints spawns the reconciler when this apiserver listens for HTTP.
func (cp *ControlPlane) startAPIEndpoints(ctx context.Context) error {
	if cp.listener == nil {
		return nil
	}
	self, err := cp.advertised()
	if err != nil {
		return err
	}
	leases, err := lease.New(ctx, cp.Conn, lease.Config{Replicas: cp.cfg.Replicas, Memory: cp.cfg.DataDir == "" && cp.cfg.NATSURL == ""})
	if err != nil {
		return err
	}
	ttl := cp.cfg.EndpointTTL
	if ttl <= 0 {
		ttl = DefaultEndpointTTL
	}
	r := &endpointReconciler{cp: cp, leases: leases, self: self, ttl: ttl}
	// The first round before Start returns: the Service exists once the API answers, and a
	// caller's first look at the log does not race these writes. Another replica starting
	// at once may be between taking the ClusterIP and writing the Service: try again shortly.
	for try := 1; ; try++ {
		err := r.reconcile(ctx)
		if err == nil {
			break
		}
		if try == 20 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
	return cp.spawn(APIEndpoints, func() actorkit.Actor { return r })
}

type endpointReconciler struct {
	cp     *ControlPlane
	leases *lease.Elector
	self   endpoint
	ttl    time.Duration
}

func (r *endpointReconciler) Receive(actx actorkit.Context) {
	switch actx.Message().(type) {
	case *actorkit.Started:
		actorkit.Go(actx, "reconcile", r.loop)
	case *actorkit.Stopping:
		// Leave at once, so the others drop this address now rather than after the TTL.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = r.leases.Withdraw(ctx, endpointsPrefix, r.cp.identity)
	}
}

func (r *endpointReconciler) loop(ctx context.Context) {
	t := time.NewTicker(r.ttl * 2 / 3)
	defer t.Stop()
	for {
		if err := r.reconcile(ctx); err != nil && ctx.Err() == nil {
			r.cp.cfg.Logger.Warn("kubernetes service endpoints", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *endpointReconciler) reconcile(ctx context.Context) error {
	me, _ := json.Marshal(r.self)
	if err := r.leases.Announce(ctx, endpointsPrefix, r.cp.identity, me); err != nil {
		return err
	}
	members, err := r.leases.Members(ctx, endpointsPrefix, r.ttl, time.Now())
	if err != nil {
		return err
	}
	var eps []endpoint
	for _, m := range members {
		var e endpoint
		if json.Unmarshal(m.Value, &e) == nil && e.IP != "" && !slices.Contains(eps, e) {
			eps = append(eps, e)
		}
	}
	slices.SortFunc(eps, func(a, b endpoint) int { return cmpStr(a.IP, b.IP) })
	if err := r.ensureService(ctx); err != nil {
		return err
	}
	return r.ensureSlice(ctx, eps)
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// firstServiceIP is the service range's first host address, kept for this Service.
func (cp *ControlPlane) firstServiceIP() (string, error) {
	cidr := cp.cfg.ServiceCIDR
	if cidr == "" {
		cidr = "10.96.0.0/16"
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", err
	}
	return p.Masked().Addr().Next().String(), nil
}

func (r *endpointReconciler) ensureService(ctx context.Context) error {
	k, _ := schemas.ByResource("", "v1", "services")
	ip, err := r.cp.firstServiceIP()
	if err != nil {
		return err
	}
	ports := []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(r.self.Port)}}
	obj, err := r.cp.Client.Get(ctx, k, metav1.NamespaceDefault, kubernetesService)
	if apierrors.IsNotFound(err) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: kubernetesService, Namespace: metav1.NamespaceDefault, Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, Ports: ports, SessionAffinity: corev1.ServiceAffinityNone},
		}
		_, err = r.cp.Client.Create(ctx, svc)
		if err != nil {
			// Another replica may have been first: its create then answers AlreadyExists, or,
			// when its ClusterIP was allocated before this create's turn, "already allocated".
			if _, gerr := r.cp.Client.Get(ctx, k, metav1.NamespaceDefault, kubernetesService); gerr == nil {
				return nil
			}
		}
		return err
	}
	if err != nil {
		return err
	}
	svc := obj.(*corev1.Service)
	if len(svc.Spec.Ports) == 1 && svc.Spec.Ports[0].Port == 443 && svc.Spec.Ports[0].TargetPort == ports[0].TargetPort && svc.Spec.Ports[0].Name == "https" {
		return nil
	}
	svc = svc.DeepCopy()
	svc.Spec.Ports = ports // kube's reconciler puts the ports back too
	_, err = r.cp.Client.Update(ctx, svc)
	return err
}

func (r *endpointReconciler) ensureSlice(ctx context.Context, eps []endpoint) error {
	k, _ := schemas.ByResource("discovery.k8s.io", "v1", "endpointslices")
	ready, name, tcp := true, "https", corev1.ProtocolTCP
	want := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: kubernetesService, Namespace: metav1.NamespaceDefault, Labels: map[string]string{discoveryv1.LabelServiceName: kubernetesService}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	if len(eps) > 0 {
		// Every replica listens on its own port; kube assumes one port for all, and so does this
		// slice: the port of the replica writing it, the Service's targetPort.
		want.Ports = []discoveryv1.EndpointPort{{Name: &name, Protocol: &tcp, Port: &r.self.Port}}
	}
	for _, e := range eps {
		want.Endpoints = append(want.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.IP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	obj, err := r.cp.Client.Get(ctx, k, metav1.NamespaceDefault, kubernetesService)
	if apierrors.IsNotFound(err) {
		_, err = r.cp.Client.Create(ctx, want)
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	cur := obj.(*discoveryv1.EndpointSlice)
	if sameEndpoints(cur, want) {
		return nil
	}
	next := cur.DeepCopy()
	next.Labels, next.Endpoints, next.Ports = want.Labels, want.Endpoints, want.Ports
	_, err = r.cp.Client.Update(ctx, next)
	return err
}

func sameEndpoints(a, b *discoveryv1.EndpointSlice) bool {
	if len(a.Endpoints) != len(b.Endpoints) || len(a.Ports) != len(b.Ports) || a.Labels[discoveryv1.LabelServiceName] != kubernetesService {
		return false
	}
	for i := range a.Endpoints {
		if !slices.Equal(a.Endpoints[i].Addresses, b.Endpoints[i].Addresses) {
			return false
		}
	}
	for i := range a.Ports {
		if a.Ports[i].Port == nil || *a.Ports[i].Port != *b.Ports[i].Port {
			return false
		}
	}
	return true
}
