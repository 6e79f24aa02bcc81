package testutil

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Helm returns a runner of Helm v4, built from its module (a go.mod tool), against the API at
// server with a kubeconfig, caches and config of its own; each run is bounded by timeout.
func Helm(t testing.TB, server string, timeout time.Duration) func(args ...string) (string, error) {
	bin := BuildBinary(t, "helm.sh/helm/v4/cmd/helm")
	home := t.TempDir()
	kubeconfig := filepath.Join(home, "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster: {server: " + server + "}\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: c\n  context: {cluster: s, user: u, namespace: default}\ncurrent-context: c\n"
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = home
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HOME="+home, "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
			"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// HelmMust wraps a Helm runner: each call fails the test unless Helm succeeds and prints want.
func HelmMust(t testing.TB, helm func(args ...string) (string, error)) func(want string, args ...string) string {
	return func(want string, args ...string) string {
		t.Helper()
		out, err := helm(args...)
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
}
