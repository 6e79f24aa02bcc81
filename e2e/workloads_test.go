package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/skiff-sh/skiff/actors/agent"
	"github.com/skiff-sh/skiff/deploy/images/examples"
)

// The workloads of issue #14 on one real node (shared, as each needs a node's start): a
// StatefulSet with claim templates, Jobs, the default Helm chart with its test, and CronJobs.
// The CronJobs mostly wait for the clock's minutes, so they run beside the others, which run
// one after another, instead of adding two minutes after them.
func TestWorkloadsOnARealNode(t *testing.T) {
	n := startNode(t, withDockerMirror(t))
	t.Run("Node", func(t *testing.T) {
		t.Run("CronJob", func(t *testing.T) {
			t.Parallel()
			cronJobsRunOnSchedule(t, n)
		})
		t.Run("InTurn", func(t *testing.T) {
			t.Parallel()
			t.Run("StatefulSet", func(t *testing.T) { statefulSetKeepsEachPodsVolume(t, n) })
			t.Run("Jobs", func(t *testing.T) { jobsRun(t, n) })
			t.Run("HelmTest", func(t *testing.T) { helmInstallAndTest(t, n) })
		})
	})
}

// withDockerMirror serves a registry holding this repository's busybox stand-in as
// docker.io/library/busybox:latest and points the node's docker.io at it (hosts.toml), as a
// node without the internet is set up.
func withDockerMirror(t *testing.T) func(*agent.Config) {
	port := serveRegistry(t)
	pushImage(t, examples.BuildBusybox, "127.0.0.1:"+port+"/library/busybox:latest")
	hosts := filepath.Join(t.TempDir(), "registries")
	if err := os.MkdirAll(filepath.Join(hosts, "docker.io"), 0o755); err != nil {
		t.Fatal(err)
	}
	mirror := "server = \"https://registry-1.docker.io\"\n\n[host.\"http://127.0.0.1:" + port + "\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
	if err := os.WriteFile(filepath.Join(hosts, "docker.io", "hosts.toml"), []byte(mirror), 0o644); err != nil {
		t.Fatal(err)
	}
	return func(c *agent.Config) { c.RegistryConfig = hosts }
}
