package controlplane_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/bus/lease"
)

// The `kubernetes` Service is 10.96.0.1:443 -> the apiserver's port, and its EndpointSlice lists
// each live replica: a replica that stops renewing drops out within the TTL.
func TestKubernetesServiceListsTheAPIServers(t *testing.T) {
	const ttl = 2 * time.Second
	c := startSACluster(t, func(cfg *controlplane.Config) { cfg.AdvertiseAddress, cfg.EndpointTTL = "192.0.2.10", ttl })
	cp, cs := c.cp, c.admin
	ctx := context.Background()
	_, portStr, _ := net.SplitHostPort(cp.URL()[len("https://"):])
	port, _ := strconv.Atoi(portStr)
	rc := cs.CoreV1().RESTClient()
	until(t, ctx, rc, "services", "default", "kubernetes", func(s *corev1.Service, ok bool) bool {
		return ok && s.Spec.ClusterIP == "10.96.0.1" && len(s.Spec.Ports) == 1 && s.Spec.Ports[0].Port == 443 &&
			s.Spec.Ports[0].Name == "https" && s.Spec.Ports[0].TargetPort.IntValue() == port && len(s.Spec.Selector) == 0
	})
	// kube-dns is kept beside it: 10.96.0.10, 53 over UDP and TCP, no selector (each node
	// routes it to its own DNS server).
	until(t, ctx, rc, "services", "kube-system", "kube-dns", func(s *corev1.Service, ok bool) bool {
		return ok && s.Spec.ClusterIP == "10.96.0.10" && len(s.Spec.Ports) == 2 && len(s.Spec.Selector) == 0 &&
			s.Spec.Ports[0].Name == "dns" && s.Spec.Ports[0].Protocol == corev1.ProtocolUDP && s.Spec.Ports[0].Port == 53 &&
			s.Spec.Ports[1].Name == "dns-tcp" && s.Spec.Ports[1].Protocol == corev1.ProtocolTCP && s.Spec.Ports[1].Port == 53
	})
	slices := func(want ...string) func(*discoveryv1.EndpointSlice, bool) bool {
		return func(s *discoveryv1.EndpointSlice, ok bool) bool {
			if !ok || s.Labels[discoveryv1.LabelServiceName] != "kubernetes" || len(s.Endpoints) != len(want) {
				return false
			}
			for i, e := range s.Endpoints {
				if e.Addresses[0] != want[i] || e.Conditions.Ready == nil || !*e.Conditions.Ready {
					return false
				}
			}
			return len(s.Ports) == 1 && *s.Ports[0].Port == int32(port)
		}
	}
	drc := cs.DiscoveryV1().RESTClient()
	until(t, ctx, drc, "endpointslices", "default", "kubernetes", slices("192.0.2.10"))

	// A second replica announces itself once, then falls silent.
	leases, err := lease.New(ctx, cp.Conn, lease.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := leases.Announce(ctx, "apiserver-endpoints", "replica-b", []byte(fmt.Sprintf(`{"ip":"192.0.2.11","port":%d}`, port))); err != nil {
		t.Fatal(err)
	}
	until(t, ctx, drc, "endpointslices", "default", "kubernetes", slices("192.0.2.10", "192.0.2.11"))
	start := time.Now()
	until(t, ctx, drc, "endpointslices", "default", "kubernetes", slices("192.0.2.10"))
	t.Logf("silent replica dropped %v after it was listed (TTL %v)", time.Since(start).Round(10*time.Millisecond), ttl)
}
