package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spf13/pflag"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// syncBuffer collects a process's stderr while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type proc struct {
	name   string
	cmd    *exec.Cmd
	stderr *syncBuffer
}

func startProc(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), stderr: &syncBuffer{}}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, p.stderr.String())
		}
	})
	return p
}

// kill is a crash: SIGKILL, no clean shutdown.
func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// apiURL finds the apiserver's URL in `skiff server`'s start message.
var apiURL = regexp.MustCompile(`skiff is up in \S+: API (\S+),`)

func leads(p *proc, lease string) bool {
	return strings.Contains(p.stderr.String(), "msg=leading lease="+lease+" ")
}

// The compose stack's shape with the real binary: three `skiff nats` servers in a cluster,
// two `skiff server` replicas with the state at R3. One replica leads, the other takes over
// when the leader is killed, and writes continue when a NATS server is killed.
func TestServerReplicasOnNATSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the skiff binary")
	}
	bin := testutil.BuildBinary(t, "./services/skiff")
	const n = 3
	var clients, routes []string
	cports, rports := make([]int, n), make([]int, n)
	for i := range n {
		cports[i], rports[i] = freePort(t), freePort(t)
		clients = append(clients, "nats://127.0.0.1:"+strconv.Itoa(cports[i]))
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(rports[i]))
	}
	nats := make([]*proc, n)
	for i := range n {
		name := fmt.Sprint("n", i+1)
		nats[i] = startProc(t, name, bin, "nats", "--name", name, "--listen", "127.0.0.1:"+strconv.Itoa(cports[i]),
			"--cluster-listen", "127.0.0.1:"+strconv.Itoa(rports[i]), "--routes", strings.Join(routes, ","),
			"--cluster-name", "skiff", "--data-dir", t.TempDir())
	}
	servers := make([]*proc, 2)
	urls := make([]string, 2)
	keys := filepath.Join(t.TempDir(), "encryption.keys") // both apiservers seal Secrets with one key
	for i := range servers {
		id := fmt.Sprint("srv", i+1)
		// Port 0: a port picked here and freed could be taken by another test before the
		// process binds it; the process says where it listens.
		servers[i] = startProc(t, id, bin, "server", "--nats-url", strings.Join(clients, ","), "--replicas", "3",
			"--listen", "127.0.0.1:0", "--lease-duration", "2s", "--identity", id, "--data-dir", t.TempDir(), "--encryption-key-file", keys)
	}
	for i, p := range servers {
		testutil.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
			m := apiURL.FindStringSubmatch(p.stderr.String())
			if m == nil {
				return fmt.Errorf("srv%d has not said where it serves the API", i+1)
			}
			urls[i] = m[1]
			return nil
		})
		u := urls[i]
		testutil.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
			resp, err := http.Get(u + "/readyz")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("srv%d /readyz: HTTP %d", i+1, resp.StatusCode)
			}
			return nil
		})
	}
	var leader, standby int
	testutil.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		a, b := leads(servers[0], "skiff-scheduler"), leads(servers[1], "skiff-scheduler")
		if a == b {
			return fmt.Errorf("scheduler leaders: srv1 %v, srv2 %v; want exactly one", a, b)
		}
		if a {
			leader, standby = 0, 1
		} else {
			leader, standby = 1, 0
		}
		return nil
	})
	killed := time.Now()
	servers[leader].kill()
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		for _, l := range []string{"skiff-scheduler", "skiff-controller-manager"} {
			if !leads(servers[standby], l) {
				return fmt.Errorf("the standby does not lead %s", l)
			}
		}
		return nil
	})
	t.Logf("standby leads %v after the leader was killed (lease 2s)", time.Since(killed).Round(time.Millisecond))

	// Writes through the surviving replica go on while a NATS server is killed.
	c := &apiclient.Client{T: apiclient.HTTP{Server: urls[standby]}}
	create := func(name string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
		if apierrors.IsAlreadyExists(err) {
			return nil // an earlier attempt landed but its answer was lost
		}
		return err
	}
	if err := create("before"); err != nil {
		t.Fatal(err)
	}
	killedNATS := time.Now()
	nats[0].kill()
	// The first write waits out the failover; seldom (about 1 run in 10) that took over 20s here.
	testutil.Eventually(t, 60*time.Second, 50*time.Millisecond, func() error { return create("after-0") })
	t.Logf("first write %v after NATS server n1 was killed", time.Since(killedNATS).Round(time.Millisecond))
	for i := 1; i < 20; i++ {
		testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error { return create(fmt.Sprint("after-", i)) })
	}
}

func TestServerAndNATSFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "--components", "scheduler", "--listen", "127.0.0.1:6443"}, "--listen"},
		{[]string{"server", "--components", ""}, "--components"},
		{[]string{"server", "--lease-duration", "10ms"}, "--lease-duration"},
		{[]string{"server", "--automount-service-account-tokens"}, "--automount-service-account-tokens: needs --api-auth"},
		{[]string{"up", "--api-auth=false", "--automount-service-account-tokens"}, "--automount-service-account-tokens: needs --api-auth"},
		{[]string{"server", "--components", "scheduler", "--encryption-key-file", "k"}, "--encryption-key-file"},
		{[]string{"server", "--tls-dir", "tls", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--nats-port", "0", "--metrics-listen", "127.0.0.1:0"}, "--tls-dir"},
		{[]string{"nats", "--routes", "nats://a:6222"}, "--routes"},
		{[]string{"nats", "--listen", "nohost"}, "--listen"},
		{[]string{"nats", "--cluster-listen", "0.0.0.0:x"}, "--cluster-listen"},
		{[]string{"nats", "--cluster-listen", "127.0.0.1:6222", "--routes", "http://a:6222", "--data-dir", t.TempDir()}, "Cluster.Routes"},
	} {
		root := newRoot()
		root.SetArgs(tc.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want an error naming %s, got %v", tc.args, tc.want, err)
		}
	}
}

// Tokens are automounted exactly when the API authenticates, unless told otherwise.
func TestAutomountFollowsAPIAuth(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--api-auth"}, true},
		{[]string{"--api-auth", "--automount-service-account-tokens=false"}, false},
		{[]string{"--automount-service-account-tokens=false"}, false},
	} {
		cfg := controlplane.Config{}
		f := pflag.NewFlagSet("server", pflag.ContinueOnError)
		controlPlaneFlags(f, &cfg, &nodeFlags{}, "")
		if err := f.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := automountFlag(f, &cfg); err != nil || cfg.AutomountServiceAccountTokens != tc.want {
			t.Errorf("%v: automount %v (%v); want %v", tc.args, cfg.AutomountServiceAccountTokens, err, tc.want)
		}
	}
}
