package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
