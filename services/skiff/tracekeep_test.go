package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

// An hour of three nodes' heartbeats (1,080 lease renewals, compressed with a short renewal
// interval) leaves the trace of the first apply where `skiff trace deploy/web` finds it, and
// a restart of `skiff up` on its data dir keeps it: traces live in the TRACES stream.
func TestFirstApplyTraceOutlivesAnHourOfHeartbeatsAndARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the skiff binary")
	}
	t.Setenv("SKIFF_DATA_DIR", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	bin := testutil.BuildBinary(t, "./services/skiff")
	dir := t.TempDir()
	up, base := upOn(t, bin, "up", dir)
	sim := startProc(t, "sim", bin, "sim", "nodes", "--data-dir", dir, "--count", "3", "--renew-interval", "20ms")
	defer sim.kill()

	manifest := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(manifest, []byte(webManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	apply := exec.Command(bin, "--server", base, "apply", "-f", manifest)
	apply.Env = append(os.Environ(), "SKIFF_DATA_DIR="+t.TempDir())
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("apply: %v: %s", err, out)
	}
	var first string // the trace's header line names its id
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		out, err := runCLI(t, base, "trace", "deploy/web")
		if err != nil || !strings.Contains(out, "skiff apply") {
			return fmt.Errorf("no apply trace for deploy/web yet: %v\n%s", err, out)
		}
		first = strings.SplitN(out, "\n", 2)[0]
		return nil
	})

	countRenewals(t, base, 3*360)
	if out, _ := runCLI(t, base, "trace", "deploy/web"); !strings.HasPrefix(out, first+"\n") {
		t.Fatalf("after an hour of heartbeats, trace deploy/web is another trace than the apply's (%s):\n%s", first, out)
	}

	sim.kill()
	up.kill()
	_, base = upOn(t, bin, "up again", dir)
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		if out, err := runCLI(t, base, "trace", "deploy/web"); err != nil || !strings.HasPrefix(out, first+"\n") {
			return fmt.Errorf("after the restart, want the apply's trace (%s): %v\n%s", first, err, out)
		}
		return nil
	})
}

// countRenewals watches the node leases until n updates have been seen.
func countRenewals(t *testing.T, base string, n int) {
	t.Helper()
	resp, err := http.Get(base + "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	seen := 0
	deadline := time.AfterFunc(3*time.Minute, func() { resp.Body.Close() })
	defer deadline.Stop()
	for seen < n && sc.Scan() {
		if strings.HasPrefix(sc.Text(), `{"type":"MODIFIED"`) {
			seen++
		}
	}
	if seen < n {
		t.Fatalf("saw %d lease renewals, want %d: %v", seen, n, sc.Err())
	}
}
