package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// The compose stack's secured shape with the real binary: `skiff cluster-creds` makes one
// directory; NATS servers, an apiserver and the scheduler and controller-manager each start
// from their part of it, read-only; the admin kubeconfig it wrote reaches the API, and
// neither an anonymous NATS client nor an anonymous HTTPS request gets in.
func TestClusterCredsSecureAMultiProcessCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the skiff binary")
	}
	bin := testutil.BuildBinary(t, "./services/skiff")
	dir := filepath.Join(t.TempDir(), "creds")
	const named = "https://127.0.0.1:6443" // what the kubeconfig names; the test's API port is picked later
	if out, err := exec.Command(bin, "cluster-creds", "--dir", dir, "--node", "n1,n2", "--server", named).CombinedOutput(); err != nil {
		t.Fatalf("cluster-creds: %v\n%s", err, out)
	}
	for _, f := range []string{"apiserver.creds", "scheduler.creds", "controller-manager.creds", "admin.creds",
		"node-n1.creds", "node-n2.creds", "tls/ca.crt", "tls/server.crt", "tokens.csv", "kubeconfig"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("cluster-creds did not write %s: %v", f, err)
		}
	}
	natsURL := "nats://127.0.0.1:" + strconv.Itoa(freePort(t))
	startProc(t, "nats", bin, "nats", "--name", "n1", "--listen", strings.TrimPrefix(natsURL, "nats://"),
		"--data-dir", t.TempDir(), "--auth-dir", filepath.Join(dir, controlplane.NATSKeysDir))
	testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
		nc, err := nats.Connect(natsURL, nats.UserCredentials(filepath.Join(dir, "admin.creds")))
		if err == nil {
			nc.Close()
		}
		return err
	})
	if nc, err := nats.Connect(natsURL); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected to the secured NATS server")
	}

	// The port is picked right before the apiserver binds it: another test may take a free port
	// meanwhile.
	apiAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	api := startProc(t, "apiserver", bin, "server", "--components", "apiserver", "--nats-url", natsURL,
		"--nats-creds", filepath.Join(dir, "apiserver.creds"), "--listen", apiAddr, "--data-dir", t.TempDir(), "--metrics-listen", "127.0.0.1:0",
		"--encryption-key-file", filepath.Join(t.TempDir(), "encryption.keys"),
		"--api-auth", "--tls-dir", filepath.Join(dir, controlplane.TLSDir), "--token-file", filepath.Join(dir, controlplane.TokenFile))
	var components []*proc
	for _, role := range []string{"scheduler", "controller-manager"} {
		components = append(components, startProc(t, role, bin, "server", "--components", role, "--identity", role, "--nats-url", natsURL,
			"--nats-creds", filepath.Join(dir, role+".creds"), "--data-dir", t.TempDir(), "--metrics-listen", "127.0.0.1:0"))
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, kubeconfigName))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != named {
		t.Fatalf("kubeconfig server %q, want %q (--server)", cfg.Host, named)
	}
	cfg.Host = "https://" + apiAddr
	cs := kubernetes.NewForConfigOrDie(cfg)
	testutil.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
		_, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello"}}, metav1.CreateOptions{})
		return err
	})
	if _, err := cs.CoreV1().ConfigMaps("default").Get(context.Background(), "hello", metav1.GetOptions{}); err != nil {
		t.Fatalf("admin kubeconfig: %v\n%s", err, api.stderr.String())
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(cfg.CAData)
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := anon.Get("https://" + apiAddr + "/api/v1/namespaces/default/configmaps")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an anonymous request got HTTP %d, want 401", resp.StatusCode)
	}
	// The scheduler and controller-manager lead on the secured NATS under their own identities.
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		for _, p := range components {
			if !leads(p, "skiff-"+p.name) {
				return fmt.Errorf("%s does not lead skiff-%s", p.name, p.name)
			}
		}
		return nil
	})
	// Neither serves an API, so neither tells the user what to run against one.
	for _, p := range components {
		if out := p.stderr.String(); !strings.Contains(out, "skiff is up in") || strings.Contains(out, "next:") {
			t.Errorf("%s start message: want no API hints for a process without the API, got\n%s", p.name, out)
		}
	}
}
