package needs_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/testkit/needs"
)

// The same Skip call skips by default and fails under SKIFF_TEST_NO_SKIP=1 (run in a child
// process so the failure is observed, not suffered).
func TestSkipFailsWhenSkipsAreForbidden(t *testing.T) {
	if os.Getenv("NEEDS_CHILD") == "1" {
		needs.Skipf(t, "missing %s", "thing")
		return
	}
	for _, tc := range []struct {
		noSkip string
		want   string
		fails  bool
	}{{"", "--- SKIP", false}, {"1", "required test cannot run", true}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSkipFailsWhenSkipsAreForbidden$", "-test.v")
		cmd.Env = append(os.Environ(), "NEEDS_CHILD=1", needs.NoSkipEnv+"="+tc.noSkip)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.fails || !strings.Contains(string(out), tc.want) {
			t.Fatalf("%s=%q: err=%v, output:\n%s", needs.NoSkipEnv, tc.noSkip, err, out)
		}
	}
}
