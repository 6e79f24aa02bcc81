// Package needs is how a test says it cannot run on this machine (no root, no containerd, a
// kernel without a feature). On a developer's machine it skips; where the environment variable
// SKIFF_TEST_NO_SKIP=1 is set (CI, root, every dependency installed) it fails instead, so a
// missing dependency can never turn a required test into a silent skip.
package needs

import (
	"fmt"
	"os"
	"testing"
)

// NoSkipEnv is the variable that turns skips into failures.
const NoSkipEnv = "SKIFF_TEST_NO_SKIP"

// Skip skips t (or fails it under SKIFF_TEST_NO_SKIP=1); args as t.Skip's.
func Skip(t testing.TB, args ...any) {
	t.Helper()
	skip(t, fmt.Sprint(args...))
}

// Skipf is Skip with a format, as t.Skipf.
func Skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	skip(t, fmt.Sprintf(format, args...))
}

func skip(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(NoSkipEnv) == "1" {
		t.Fatalf("required test cannot run (%s=1): %s", NoSkipEnv, msg)
	}
	t.Skip(msg)
}
