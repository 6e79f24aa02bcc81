package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/skiff-sh/skiff/actors/agent"
	"github.com/skiff-sh/skiff/testkit/dnstest"
	"github.com/skiff-sh/skiff/testkit/echoapp"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// A pod resolves Services through its node's cluster DNS: its resolv.conf names kube-dns with
// the cluster search path (dnsPolicy ClusterFirst), the proxy sends 10.96.0.10 to the node's
// DNS server, and a Service's short and full names both reach its pods.
func TestPodResolvesServicesByName(t *testing.T) {
	n := startNode(t)
	n.apply(t, backend)
	n.waitReady(t, "app=backend", 2)
	client := n.waitReady(t, "app=client", 1)[0]
	conf, err := n.exec(t, client, "-cat", "/etc/resolv.conf")
	if err != nil {
		t.Fatalf("cat resolv.conf: %v %s", err, conf)
	}
	if !strings.HasPrefix(conf, "nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local") ||
		!strings.Contains(conf, "\noptions ndots:5\n") {
		t.Fatalf("resolv.conf:\n%s", conf)
	}
	for _, url := range []string{"http://backend/", "http://backend.default.svc.cluster.local:80/"} {
		testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
			out, err := n.exec(t, client, "-probe", url)
			if err != nil || !strings.Contains(out, `"pod"`) {
				return fmt.Errorf("GET %s: %v: %s", url, err, out)
			}
			return nil
		})
	}
}

// upstreamZone is what the test's upstream resolver knows and nothing else does.
const (
	upstreamName = "db.upstream.test."
	upstreamAddr = "192.0.2.10"
)

// startUpstream runs a DNS server on the host's loopback that answers upstreamName and
// NXDOMAIN for anything else: a real upstream for the node's DNS server, without the internet.
func startUpstream(t *testing.T) string {
	return dnstest.Serve(t, func(q dns.Question, m *dns.Msg) {
		switch {
		case !strings.EqualFold(q.Name, upstreamName):
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			rr, _ := dns.NewRR(upstreamName + " 60 IN A " + upstreamAddr)
			m.Answer = []dns.RR{rr}
		}
	})
}

// names is a headless Service with a one-pod StatefulSet under it, and an ExternalName Service
// to a name only the upstream knows, beside backend and its client.
const names = `
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 8080}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: echo
        image: skiff.local/httpecho:v1
        ports: [{name: http, containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: db}
spec:
  type: ExternalName
  externalName: db.upstream.test
`

// From a pod, through Go's resolver and the pod's resolv.conf: a Service's short name and FQDN
// give its ClusterIP, a StatefulSet member's name under its headless Service gives its pod's
// IP, an outside name and an ExternalName Service to it resolve through the node's upstream,
// and SRV gives a Service's named port.
func TestPodResolvesClusterAndUpstreamNames(t *testing.T) {
	up := startUpstream(t)
	n := startNode(t, func(c *agent.Config) { c.DNSUpstreams = []string{up} })
	n.apply(t, echoapp.Join(backend, names))
	n.waitReady(t, "app=backend", 2)
	web := n.waitReady(t, "app=web", 1)[0]
	client := n.waitReady(t, "app=client", 1)[0]
	clusterIP := n.clusterIP(t, "backend")
	for _, c := range []struct{ name, rtype, want string }{
		{"backend", "A", clusterIP},
		{"backend.default.svc.cluster.local", "A", clusterIP},
		{"web-0.web", "A", web.Status.PodIP},
		{"web-0.web.default.svc.cluster.local", "A", web.Status.PodIP},
		{"db.upstream.test", "A", upstreamAddr},
		{"db", "CNAME", upstreamName},
		{"db", "A", upstreamAddr},
		{"_http._tcp.backend", "SRV", "backend.default.svc.cluster.local. 80"},
		{"_http._tcp.web", "SRV", "web-0.web.default.svc.cluster.local. 8080"},
	} {
		// The slices of a just-Ready pod may reach the DNS server a moment after the API.
		testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
			out, err := n.exec(t, client, "-resolve", c.name, "-resolve-type", c.rtype)
			if err != nil || strings.TrimSpace(out) != c.want {
				return fmt.Errorf("%s %s: %v: %q, want %q", c.rtype, c.name, err, out, c.want)
			}
			return nil
		})
	}
	// A name neither the cluster nor the upstream knows fails, after every search domain.
	if out, err := n.exec(t, client, "-resolve", "nothing.upstream.test"); err == nil || !strings.Contains(out, "no such host") {
		t.Fatalf("nothing.upstream.test: %v %q", err, out)
	}
}
