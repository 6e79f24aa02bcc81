package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/echoapp"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// The compose stack (deploy/compose.yaml) as a user meets it: brought up with Docker, secured
// (NATS credentials per component, the API over HTTPS with authentication), driven through the
// published apiserver with the admin kubeconfig its init service made, observed in Jaeger. Run by `go tool task compose:test`, which
// builds the images first and afterwards removes the pods' cgroups the agents leave on the host.
// SKIFF_COMPOSE_KEEP=1 leaves the stack up.
func TestComposeStack(t *testing.T) {
	if os.Getenv("SKIFF_E2E_COMPOSE") != "1" {
		t.Skip("set SKIFF_E2E_COMPOSE=1 (go tool task compose:test) to run the compose stack")
	}
	st := newComposeStack(t)
	start := time.Now()
	st.compose(t, "up", "-d")
	if os.Getenv("SKIFF_COMPOSE_KEEP") != "1" {
		t.Cleanup(func() { st.compose(t, "down", "-v") })
	}
	st.connect(t)
	nodes := st.waitNodesReady(t, 3, 3*time.Minute)
	t.Logf("stack up: API answering and %d nodes Ready %v after `compose up`", len(nodes), time.Since(start).Round(time.Millisecond))

	// Backends on every node but the client's, so each answer crosses nodes.
	clientNode := nodes[len(nodes)-1]
	suffix := fmt.Sprintf("%06x", rand.Uint32()&0xffffff)
	web := "web-" + suffix
	applied := time.Now()
	st.apply(t, composeWeb(web, clientNode))
	t.Cleanup(st.deleteAll)
	backends := st.waitPodsReady(t, "app="+web, len(nodes)-1)
	onNodes := map[string]bool{}
	for _, p := range backends {
		onNodes[p.Spec.NodeName] = true
	}
	if len(onNodes) < 2 {
		t.Fatalf("want the %d backends on 2 nodes, got them on %v", len(backends), onNodes)
	}
	svcKind, _ := schemas.ByResource("", "v1", "services")
	obj, err := st.api.Get(context.Background(), svcKind, "default", web)
	if err != nil {
		t.Fatal(err)
	}
	vip := obj.(*corev1.Service).Spec.ClusterIP

	// A one-shot client pod on the remaining node GETs the ClusterIP; it is retried (a new pod)
	// until the proxies have the endpoints.
	var answer struct {
		Pod string `json:"pod"`
	}
	attempt := 0
	testutil.Eventually(t, 2*time.Minute, time.Second, func() error {
		attempt++
		name := fmt.Sprintf("client-%s-%d", suffix, attempt)
		out, err := st.runClient(t, name, clientNode, "http://"+vip+"/")
		if err != nil {
			return err
		}
		return json.Unmarshal([]byte(strings.TrimSpace(out)), &answer)
	})
	served := time.Since(applied)
	i := slices.IndexFunc(backends, func(p *corev1.Pod) bool { return p.Name == answer.Pod })
	if i < 0 {
		t.Fatalf("the ClusterIP answered as pod %q, not one of the backends", answer.Pod)
	}
	if backends[i].Spec.NodeName == clientNode {
		t.Fatalf("backend %s is on the client's node %s", answer.Pod, clientNode)
	}
	t.Logf("apply -> a pod on %s served by %s on %s via ClusterIP %s: %v (%d client pods)",
		clientNode, answer.Pod, backends[i].Spec.NodeName, vip, served.Round(time.Millisecond), attempt)

	// The Deployment's create is one trace in Jaeger reaching the controllers and the scheduler.
	st.waitTrace(t, web, 90*time.Second)

	// Losing a NATS server, a scheduler and a controller-manager: the state stream at R3 keeps
	// its quorum and the standbys take over within the lease duration (15s).
	down := []string{"nats1", "scheduler1", "controller-manager1"}
	st.compose(t, append([]string{"stop"}, down...)...)
	t.Cleanup(func() { st.compose(t, append([]string{"start"}, down...)...) })
	failover := time.Now()
	web2 := web + "-b"
	testutil.Eventually(t, 30*time.Second, 500*time.Millisecond, func() error {
		return st.tryApply(composeWeb(web2, clientNode))
	})
	st.waitPodsReady(t, "app="+web2, len(nodes)-1)
	t.Logf("with %v stopped, a new Deployment's pods were Ready in %v", down, time.Since(failover).Round(time.Millisecond))
}

// composeWeb is two echo pods on two different nodes other than avoid, and their Service.
func composeWeb(name, avoid string) string {
	return echoapp.App{Name: name, PodSpec: fmt.Sprintf(`affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: NotIn, values: [%[2]s]}]
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - labelSelector: {matchLabels: {app: %[1]s}}
      topologyKey: kubernetes.io/hostname`, name, avoid)}.Manifest()
}

type composeStack struct {
	cmd     []string // docker compose or docker-compose, with the file and project
	api     *apiclient.Client
	jaeger  string
	created []created
}

type created struct {
	kind *schemas.Kind
	name string
}

func newComposeStack(t *testing.T) *composeStack {
	t.Helper()
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skipf("docker does not answer (bash .ci/deps/docker.sh starts it): %v", err)
	}
	tag := os.Getenv("SKIFF_IMAGE_TAG")
	if tag == "" {
		tag = "dev"
	}
	for _, img := range []string{"skiff", "skiff-agent", "skiff-jaeger"} {
		if err := exec.Command("docker", "image", "inspect", img+":"+tag).Run(); err != nil {
			t.Fatalf("image %s:%s missing: build it with `go tool task compose:build`", img, tag)
		}
	}
	cmd := []string{"docker-compose"}
	if exec.Command("docker", "compose", "version").Run() == nil {
		cmd = []string{"docker", "compose"}
	}
	project := envOr("SKIFF_COMPOSE_PROJECT", "skiff")
	cmd = append(cmd, "-f", filepath.Join(testutil.RepoRoot(), "deploy", "compose.yaml"), "-p", project)
	return &composeStack{cmd: cmd, jaeger: "http://127.0.0.1:" + envOr("SKIFF_JAEGER_PORT", "16686")}
}

// connect reaches the API as the stack's admin, with the kubeconfig its init service made in
// the creds volume, after checking that a request without credentials is refused.
func (s *composeStack) connect(t *testing.T) {
	t.Helper()
	c := exec.Command(s.cmd[0], append(s.cmd[1:], "run", "--rm", "--no-deps", "-T", "init", "kubeconfig", "--data-dir", "/creds")...)
	var stderr strings.Builder
	c.Stderr = &stderr
	kubeconfig, err := c.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(c.Args, " "), err, stderr.String())
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatalf("the init service's kubeconfig: %v", err)
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cfg.Host, "https://") || len(cfg.CAData) == 0 || len(cfg.CertData) == 0 {
		t.Fatalf("want an HTTPS kubeconfig with a CA and a client certificate, got server %q", cfg.Host)
	}
	s.api = &apiclient.Client{T: apiclient.HTTP{Server: cfg.Host, Client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}}}
	anon := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: tlsCfg.RootCAs}}}
	testutil.Eventually(t, 2*time.Minute, time.Second, func() error {
		resp, err := anon.Get(cfg.Host + "/api/v1/nodes")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			return fmt.Errorf("a request without credentials got HTTP %d, want 401", resp.StatusCode)
		}
		return nil
	})
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func (s *composeStack) compose(t *testing.T, args ...string) {
	t.Helper()
	c := exec.Command(s.cmd[0], append(s.cmd[1:], args...)...)
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(c.Args, " "), err, out)
	}
}

// logs prints the stack's recent logs: what a failed run needs to be understood.
func (s *composeStack) logs(t *testing.T) {
	c := exec.Command(s.cmd[0], append(s.cmd[1:], "logs", "--no-color", "--tail", "40")...)
	out, _ := c.CombinedOutput()
	t.Logf("compose logs:\n%s", out)
}

func (s *composeStack) waitNodesReady(t *testing.T, want int, total time.Duration) []string {
	t.Helper()
	k, _ := schemas.ByResource("", "v1", "nodes")
	var ready []string
	fail := true
	defer func() {
		if fail {
			s.logs(t)
		}
	}()
	testutil.Eventually(t, total, time.Second, func() error {
		objs, _, err := s.api.List(context.Background(), k, "", nil)
		if err != nil {
			return err
		}
		ready = ready[:0]
		for _, o := range objs {
			n := o.(*corev1.Node)
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready = append(ready, n.Name)
				}
			}
		}
		if len(ready) < want {
			return fmt.Errorf("%d of %d nodes Ready: %v", len(ready), want, ready)
		}
		return nil
	})
	fail = false
	slices.Sort(ready)
	return ready
}

func (s *composeStack) apply(t *testing.T, manifest string) {
	t.Helper()
	if err := s.tryApply(manifest); err != nil {
		t.Fatal(err)
	}
}

// tryApply creates each object of manifest that does not exist yet.
func (s *composeStack) tryApply(manifest string) error {
	docs, err := schemas.DecodeManifests([]byte(manifest))
	if err != nil {
		return err
	}
	for _, d := range docs {
		k, _ := schemas.ByGVK(d.GVK)
		name := d.Object.(metav1.Object).GetName()
		if slices.Contains(s.created, created{k, name}) {
			continue
		}
		// AlreadyExists: a retried create whose first answer was lost.
		if _, err := s.api.Create(context.Background(), d.Object); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s: %w", k.Resource, name, err)
		}
		s.created = append(s.created, created{k, name})
	}
	return nil
}

// deleteAll removes what the test created, for a stack that is kept.
func (s *composeStack) deleteAll() {
	for _, c := range s.created {
		_ = s.api.Delete(context.Background(), c.kind, "default", c.name, nil)
	}
}

func (s *composeStack) waitPodsReady(t *testing.T, selector string, want int) []*corev1.Pod {
	t.Helper()
	k, _ := schemas.ByResource("", "v1", "pods")
	var pods []*corev1.Pod
	testutil.Eventually(t, 2*time.Minute, 500*time.Millisecond, func() error {
		objs, _, err := s.api.List(context.Background(), k, "default", url.Values{"labelSelector": {selector}})
		if err != nil {
			return err
		}
		pods = pods[:0]
		for _, o := range objs {
			if p := o.(*corev1.Pod); ready(p) && p.Status.PodIP != "" {
				pods = append(pods, p)
			}
		}
		if len(pods) != want {
			return fmt.Errorf("%d of %d pods %s ready", len(pods), want, selector)
		}
		return nil
	})
	return pods
}

// runClient runs `httpecho -probe target` once in a pod on node and returns its output; an
// error when the probe failed.
func (s *composeStack) runClient(t *testing.T, name, node, target string) (string, error) {
	t.Helper()
	pod := &corev1.Pod{}
	pod.APIVersion, pod.Kind = "v1", "Pod"
	pod.Name, pod.Namespace = name, "default"
	pod.Spec = corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
		Name: "probe", Image: "skiff.local/httpecho:v1", Command: []string{"/httpecho", "-probe", target},
	}}}
	k, _ := schemas.ByResource("", "v1", "pods")
	if _, err := s.api.Create(context.Background(), pod); err != nil {
		return "", err
	}
	s.created = append(s.created, created{k, name})
	var phase corev1.PodPhase
	testutil.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		o, err := s.api.Get(context.Background(), k, "default", name)
		if err != nil {
			return err
		}
		if phase = o.(*corev1.Pod).Status.Phase; phase != corev1.PodSucceeded && phase != corev1.PodFailed {
			return fmt.Errorf("client pod %s is %q", name, phase)
		}
		return nil
	})
	out, err := s.api.Raw(context.Background(), http.MethodGet, apiclient.Path(k, "default", name, "log"), "", nil)
	if err != nil {
		return "", fmt.Errorf("logs of %s: %w", name, err)
	}
	if phase == corev1.PodFailed {
		return "", fmt.Errorf("client pod %s failed: %s", name, out)
	}
	return string(out), nil
}

// jaegerTrace is the part of Jaeger's /api/traces answer the test reads.
type jaegerTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		OperationName string `json:"operationName"`
		ProcessID     string `json:"processID"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

// waitTrace finds the trace of the Deployment's create in Jaeger and checks that it reaches the
// controllers, the scheduler and a kubelet: four other processes.
func (s *composeStack) waitTrace(t *testing.T, deployment string, total time.Duration) {
	t.Helper()
	want := []string{"create deployments", "reconcile deployment-controller", "reconcile replicaset-controller",
		"schedule pod", "kubelet sync pod"}
	testutil.Eventually(t, total, time.Second, func() error {
		q := url.Values{
			"service":   {"skiff"},
			"operation": {"create deployments"},
			"tags":      {fmt.Sprintf(`{"k8s.name":%q}`, deployment)},
			"lookback":  {"1h"},
			"limit":     {"5"},
		}
		resp, err := http.Get(s.jaeger + "/api/traces?" + q.Encode())
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var body struct {
			Data []jaegerTrace `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return fmt.Errorf("jaeger answered %s: %w", resp.Status, err)
		}
		if len(body.Data) == 0 {
			return errors.New("no trace of the Deployment's create in Jaeger yet")
		}
		for _, tr := range body.Data {
			ops := map[string]bool{}
			services := map[string]bool{}
			for _, sp := range tr.Spans {
				ops[sp.OperationName] = true
				services[tr.Processes[sp.ProcessID].ServiceName] = true
			}
			missing := slices.DeleteFunc(slices.Clone(want), func(op string) bool { return ops[op] })
			if len(missing) == 0 {
				t.Logf("trace %s: %d spans from %d processes (%v)", tr.TraceID, len(tr.Spans), len(tr.Processes), mapKeys(services))
				return nil
			}
			err = fmt.Errorf("trace %s lacks %v (has %v)", tr.TraceID, missing, mapKeys(ops))
		}
		return err
	})
}

func mapKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
