// Package testutil holds helpers shared by Skiff's tests; the harnesses beside it in testkit/
// start real parts (control planes, netns clusters, VMs), so unlike internal/ they import actors/.
package testutil

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/actors/controlplane"
)

// Eventually polls f every `every` until it returns nil or `total` passes, then fails the test
// with f's last error. Tests synchronise with it instead of sleeping.
func Eventually(t testing.TB, total, every time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %v: %v", total, err)
		}
		time.Sleep(every)
	}
}

// StartControlPlane runs a control plane on an embedded NATS server with its store in a temp
// dir and the API on a random loopback port; it is stopped when the test ends.
func StartControlPlane(t testing.TB, mutate ...func(*controlplane.Config)) *controlplane.ControlPlane {
	t.Helper()
	cfg := controlplane.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", CheckCacheMutations: true}
	for _, m := range mutate {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(cp.Stop)
	// Before the stop: every component shares the cached objects, which none may change.
	t.Cleanup(func() {
		if err := cp.Informers.Mutations(); err != nil {
			t.Error(err)
		}
		if cp.API != nil {
			if err := cp.API.SharedMutations(); err != nil {
				t.Error(err)
			}
		}
	})
	return cp
}

// RepoRoot is the module's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

var (
	buildMu    sync.Mutex
	buildCache = map[string]string{}
)

// BuildBinary builds a main package of this module (e.g. "./services/kubectl") once per test
// process and returns the binary's path. SKIFF_TEST_BIN_DIR keeps binaries between runs.
func BuildBinary(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := buildCache[pkg]; ok {
		return p
	}
	dir := os.Getenv("SKIFF_TEST_BIN_DIR")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "skiff-bin-"); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	buildCache[pkg] = out
	return out
}
