package e2e

import (
	"os"
	"testing"

	"github.com/skiff-sh/skiff/actors/kubelet/runtime/crilog"
	"github.com/skiff-sh/skiff/testkit/cgrouptest"
)

// TestMain runs the tests, the container logger a node's shim started, or the load client a test started in a node's cgroup (load_test.go).
func TestMain(m *testing.M) {
	crilog.RunIfLogger() // the nodes' container logger is this binary (nodebintest.CarryLogger)
	if cgrouptest.IsClient(loadClientEnv) {
		serveLoad(os.Stdin, os.Stdout)
		return
	}
	os.Exit(m.Run())
}
