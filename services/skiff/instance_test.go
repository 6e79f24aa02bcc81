package main

import (
	"os"
	"path/filepath"
	"testing"
)

// skiff sim nodes addressed at an instance by its kubeconfig finds that instance's data dir and
// NATS, not the default instance's; explicit flags still win.
func TestSimFindsTheAddressedInstance(t *testing.T) {
	inst := t.TempDir()
	if err := writeNATSURL(inst, "nats://127.0.0.1:4333"); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(inst, kubeconfigName)
	if err := os.WriteFile(kubeconfig, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := instanceDataDir("/default", false, kubeconfig)
	if dir != inst {
		t.Fatalf("data dir %q, want the kubeconfig's instance %q", dir, inst)
	}
	if u := instanceNATSURL(defaultNATSURL, false, dir); u != "nats://127.0.0.1:4333" {
		t.Fatalf("NATS URL %q, want the instance's", u)
	}
	if d := instanceDataDir("/given", true, kubeconfig); d != "/given" {
		t.Fatalf("--data-dir given, got %q", d)
	}
	if u := instanceNATSURL("nats://h:1", true, dir); u != "nats://h:1" {
		t.Fatalf("--nats-url given, got %q", u)
	}
	// A kubeconfig outside any instance dir leaves the defaults.
	other := filepath.Join(t.TempDir(), "config")
	if d := instanceDataDir("/default", false, other); d != "/default" {
		t.Fatalf("foreign kubeconfig: data dir %q", d)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	if d := instanceDataDir("/default", false, ""); d != inst {
		t.Fatalf("$KUBECONFIG: data dir %q, want %q", d, inst)
	}
}
