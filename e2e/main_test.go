package e2e

import (
	"os"
	"testing"

	"github.com/skiff-sh/skiff/testkit/cgrouptest"
)

// TestMain runs the tests, or the load client a test started in a node's cgroup (load_test.go).
func TestMain(m *testing.M) {
	if cgrouptest.IsClient(loadClientEnv) {
		serveLoad(os.Stdin, os.Stdout)
		return
	}
	os.Exit(m.Run())
}
