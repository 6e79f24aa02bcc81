package clusterdns_test

import (
	"fmt"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/endpointslice"
	"github.com/skiff-sh/skiff/actors/simnode"
)

// Pods with a hostname and the headless Service's name as subdomain (a StatefulSet's) get
// <hostname>.<svc>.<ns>.svc names, from the slices the EndpointSlice controller writes once
// they run and are Ready.
func TestPodHostnamesUnderHeadlessService(t *testing.T) {
	f := start(t)
	ct.Spawn(t, f.cp, "endpointslice", endpointslice.New(endpointslice.Config{Informers: f.cp.Informers, Client: f.cp.Client}))
	ct.Spawn(t, f.cp, "simnode", simnode.New(simnode.Config{Log: f.cp.Log, Client: f.cp.Client, Nodes: 1}))
	f.create(service("db", func(s *corev1.Service) {
		s.Spec.ClusterIP = corev1.ClusterIPNone
		s.Spec.Selector = map[string]string{"app": "db"}
		s.Spec.Ports[0].TargetPort = intstr.FromString("http")
	}))
	for i := range 2 {
		p := &corev1.Pod{ObjectMeta: metaNS(fmt.Sprintf("db-%d", i), "default"), Spec: ct.Template("db", "img").Spec}
		p.Labels = map[string]string{"app": "db"}
		p.Spec.Hostname, p.Spec.Subdomain, p.Spec.NodeName = p.Name, "db", "sim-0"
		f.create(p)
	}
	var ips []string
	ct.Wait(t, func() error {
		ips = nil
		for i := range 2 {
			p := ct.Get[*corev1.Pod](t, f.cp, "", "pods", "default", fmt.Sprintf("db-%d", i))
			if p.Status.PodIP == "" {
				return fmt.Errorf("%s has no IP yet", p.Name)
			}
			ips = append(ips, p.Status.PodIP)
		}
		return nil
	})
	const base = "db.default.svc.cluster.local."
	f.waitAnswer("db-0."+base, dns.TypeA, "A "+ips[0])
	f.waitAnswer("db-1."+base, dns.TypeA, "A "+ips[1])
	f.waitAnswer(base, dns.TypeA, "A "+ips[0], "A "+ips[1])
	f.waitAnswer("_http._tcp."+base, dns.TypeSRV, "SRV 0 100 8080 db-0."+base, "SRV 0 100 8080 db-1."+base)
}
