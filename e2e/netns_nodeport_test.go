package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/bpf/nodeport"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/echoapp"
	"github.com/skiff-sh/skiff/testkit/netnscluster"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

const hostPortPod = `
apiVersion: v1
kind: Pod
metadata: {name: hostport, labels: {app: hostport}}
spec:
  nodeSelector: {kubernetes.io/hostname: %s}
  containers:
  - name: echo
    image: %s
    ports:
    - {containerPort: 8080, hostPort: 18080}
    - {containerPort: 8080, hostPort: 18080, protocol: UDP}
`

// A host outside the cluster (its own netns on the nodes' network, no routes to pods) reaches a
// pod on node A through node B's NodePort over TCP and UDP (tc eBPF on B: DNAT to the pod and
// SNAT to B's address); with externalTrafficPolicy Local the pod sees the host's own address
// through A's NodePort; as a LoadBalancer the Service gets the nodes' addresses, which answer;
// with Local, its healthCheckNodePort tells which node has endpoints. A pod's hostPort (TCP
// and UDP) answers at its node's address (tc eBPF, no portmap).
func TestNetnsNodePortFromOutside(t *testing.T) {
	c := startCluster(t, netnscluster.Options{Nodes: 2})
	a, b := c.Nodes[0], c.Nodes[1]
	outside := c.AddHost(0)
	probe := testutil.BuildBinary(t, "./deploy/images/httpecho")
	app := echoapp.App{Name: "web", Replicas: 1, PodSpec: echoapp.OnNode(a.Name),
		ServicePorts: "- {name: udp, port: 81, targetPort: 8080, protocol: UDP}"}
	c.apply(app.Manifest() + "---\n" + fmt.Sprintf(hostPortPod, a.Name, echoapp.Image))
	pod := c.waitPods("app=web", 1, 90*time.Second, onNode(a.Name))[0]
	svc := c.updateService("web", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	tcpPort, udpPort := svc.Spec.Ports[0].NodePort, svc.Spec.Ports[1].NodePort

	get := func(ip string, port int32) (echo, error) {
		out, err := outside.Run(probe, "-probe", fmt.Sprintf("http://%s:%d/", ip, port))
		if err != nil {
			return echo{}, err
		}
		var e echo
		return e, json.Unmarshal([]byte(out), &e)
	}
	start := time.Now()
	testutil.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		e, err := get(b.IP, tcpPort)
		if err != nil {
			return err
		}
		if e.Pod != pod.Name || !strings.HasPrefix(e.Remote, b.IP+":") {
			return fmt.Errorf("answer %+v: want pod %s seeing node %s (SNAT)", e, pod.Name, b.IP)
		}
		return nil
	})
	t.Logf("outside host -> %s:%d (TCP) -> pod on %s within %v", b.IP, tcpPort, a.Name, elapsed(start))
	wantAttachMode(t, b, nodeport.FilterPrefix, 2) // the node's eth0, both sides
	testutil.Eventually(t, 10*time.Second, 200*time.Millisecond, func() error {
		out, err := outside.Run(probe, "-udp-probe", fmt.Sprintf("%s:%d", b.IP, udpPort))
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("%s from %s:%d", pod.Name, b.IP, udpPort); strings.TrimSpace(out) != want {
			return fmt.Errorf("UDP answer %q, want %q", out, want)
		}
		return nil
	})

	// Local: A (which has the endpoint) answers with the client's address kept; B, without
	// one, drops the traffic.
	c.updateService("web", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal })
	testutil.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		e, err := get(a.IP, tcpPort)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(e.Remote, outside.IP+":") {
			return fmt.Errorf("backend saw %s, want the outside host %s", e.Remote, outside.IP)
		}
		return nil
	})
	testutil.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		if e, err := get(b.IP, tcpPort); err == nil {
			return fmt.Errorf("node %s without a local endpoint answered: %+v", b.Name, e)
		}
		return nil
	})

	// LoadBalancer: the nodes' addresses in status, answering at the Service's own port.
	svc = c.updateService("web", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	})
	var ingress []string
	testutil.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		s := c.service("web")
		ingress = nil
		for _, in := range s.Status.LoadBalancer.Ingress {
			ingress = append(ingress, in.IP)
		}
		if len(ingress) != 2 || !strings.Contains(strings.Join(ingress, " "), b.IP) {
			return fmt.Errorf("ingress %v, want both nodes' addresses", ingress)
		}
		return nil
	})
	for _, ip := range ingress {
		testutil.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
			e, err := get(ip, 80)
			if err == nil && e.Pod != pod.Name {
				err = fmt.Errorf("answer %+v", e)
			}
			return err
		})
	}
	t.Logf("LoadBalancer ingress %v answers on port 80; nodePorts %d/TCP %d/UDP", ingress, tcpPort, udpPort)

	c.waitPods("app=hostport", 1, 60*time.Second, onNode(a.Name))
	testutil.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		e, err := get(a.IP, 18080)
		if err == nil && (e.Pod != "hostport" || !strings.HasPrefix(e.Remote, outside.IP+":")) {
			err = fmt.Errorf("hostPort answer %+v: want pod hostport seeing %s", e, outside.IP)
		}
		if err != nil {
			return err
		}
		out, err := outside.Run(probe, "-udp-probe", a.IP+":18080")
		if want := "hostport from " + a.IP + ":18080"; err == nil && strings.TrimSpace(out) != want {
			err = fmt.Errorf("UDP hostPort answer %q, want %q", out, want)
		}
		return err
	})

	// Local LoadBalancer: the healthCheckNodePort says which node has endpoints.
	svc = c.updateService("web", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal })
	hc := fmt.Sprintf(":%d/healthz", svc.Spec.HealthCheckNodePort)
	testutil.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		out, err := outside.Run(probe, "-probe", "http://"+a.IP+hc)
		if err != nil || !strings.Contains(out, `"localEndpoints":1`) {
			return fmt.Errorf("health check on %s: %v %q, want 200 with one local endpoint", a.Name, err, out)
		}
		// httpecho -probe prints the body and fails on a 503.
		if out, err := outside.Run(probe, "-probe", "http://"+b.IP+hc); err == nil || !strings.Contains(out, `"localEndpoints":0`) {
			return fmt.Errorf("health check on %s: %v %q, want 503 with no local endpoint", b.Name, err, out)
		}
		return nil
	})
}

func (c *cluster) service(name string) *corev1.Service {
	c.t.Helper()
	k, _ := schemas.ByResource("", "v1", "services")
	o, err := c.client().Get(context.Background(), k, "default", name)
	if err != nil {
		c.t.Fatal(err)
	}
	return o.(*corev1.Service)
}

// updateService changes a Service through the API and returns it as stored.
func (c *cluster) updateService(name string, change func(*corev1.Service)) *corev1.Service {
	c.t.Helper()
	s := c.service(name)
	change(s)
	o, err := c.client().Update(context.Background(), s)
	if err != nil {
		c.t.Fatalf("update Service %s: %v", name, err)
	}
	return o.(*corev1.Service)
}
