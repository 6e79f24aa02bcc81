package e2e

import (
	"testing"
	"time"

	"github.com/skiff-sh/skiff/deploy/images/examples"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// `helm install` of the chart `helm create` makes, unmodified, with this repository's image
// set as a user would (--set); then `helm test` passes: its test pod runs `busybox` (pulled,
// as imagePullPolicy Always says, from the docker.io mirror) doing `wget <fullname>:<port>`
// over cluster DNS and the Service.
func helmInstallAndTest(t *testing.T, n *node) {
	helm := testutil.Helm(t, n.cp.URL(), 180*time.Second)
	must := testutil.HelmMust(t, helm)
	must("Creating demo", "create", "demo")
	start := time.Now()
	must("STATUS: deployed", "install", "web", "./demo",
		"--set", "image.repository=skiff.local/httpecho", "--set", "image.tag=v1", "--set", "service.port=8080")
	n.waitReady(t, "app.kubernetes.io/instance=web", 1)
	t.Logf("installed and ready in %s", elapsed(start))
	start = time.Now()
	out := must("Phase:          Succeeded", "test", "web", "--timeout", "2m")
	t.Logf("helm test passed in %s:\n%s", elapsed(start), out)
	p, err := getPod(n, "web-demo-test-connection")
	if err != nil {
		t.Fatal(err)
	}
	if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].ImageID != examples.Busybox || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 0 {
		t.Fatalf("test pod's container: %+v", cs)
	}
	must(`release "web" uninstalled`, "uninstall", "web")
}
