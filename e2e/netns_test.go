package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/nodeapi"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/echoapp"
	"github.com/skiff-sh/skiff/testkit/netnscluster"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// cluster wraps a netns cluster with the API helpers the multi-node tests share.
type cluster struct {
	*netnscluster.Cluster
	t *testing.T
}

func startCluster(t *testing.T, o netnscluster.Options) *cluster {
	t.Helper()
	start := time.Now()
	c := &cluster{Cluster: netnscluster.Start(t, o), t: t}
	t.Logf("%d netns nodes Ready in %v", len(c.Nodes), time.Since(start).Round(time.Millisecond))
	return c
}

func (c *cluster) client() *apiclient.Client { return c.CP.Client }

func (c *cluster) apply(manifest string) {
	c.t.Helper()
	createAll(c.t, c.client(), manifest)
}

func createAll(t *testing.T, cl *apiclient.Client, manifest string) {
	t.Helper()
	docs, err := schemas.DecodeManifests([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if _, err := cl.Create(context.Background(), d.Object); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *cluster) pods(selector string) ([]*corev1.Pod, error) {
	k, _ := schemas.ByResource("", "v1", "pods")
	objs, _, err := c.client().List(context.Background(), k, "default", map[string][]string{"labelSelector": {selector}})
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*corev1.Pod))
	}
	return out, nil
}

// waitPods waits until exactly want pods match selector, are Ready with an IP, are not being
// deleted, and pass keep (nil keeps all); it returns them.
func (c *cluster) waitPods(selector string, want int, within time.Duration, keep func(*corev1.Pod) error) []*corev1.Pod {
	c.t.Helper()
	var out []*corev1.Pod
	testutil.Eventually(c.t, within, 100*time.Millisecond, func() error {
		pods, err := c.pods(selector)
		if err != nil {
			return err
		}
		out = out[:0]
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				continue
			}
			if !ready(p) || p.Status.PodIP == "" {
				return fmt.Errorf("pod %s on %q not ready", p.Name, p.Spec.NodeName)
			}
			if keep != nil {
				if err := keep(p); err != nil {
					return err
				}
			}
			out = append(out, p)
		}
		if len(out) != want {
			return fmt.Errorf("%d pods %s ready, want %d", len(out), selector, want)
		}
		return nil
	})
	return out
}

// exec runs the httpecho binary in a pod through the apiserver's pods/exec, which reaches the
// pod's node agent over NATS.
func (c *cluster) exec(p *corev1.Pod, args ...string) (string, error) {
	k, _ := schemas.ByResource("", "v1", "pods")
	q := url.Values{"command": append([]string{"/httpecho"}, args...)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := c.client().Raw(ctx, "POST", apiclient.Path(k, p.Namespace, p.Name, "exec")+"?"+q.Encode(), "application/octet-stream", nil)
	if err != nil {
		return "", err
	}
	var rep nodeapi.ExecReply
	if err := json.Unmarshal(out, &rep); err != nil {
		return "", err
	}
	if rep.ExitCode != 0 {
		return string(rep.Stdout) + string(rep.Stderr), fmt.Errorf("exit %d", rep.ExitCode)
	}
	return string(rep.Stdout), nil
}

// echo is what httpecho answers.
type echo struct {
	Pod    string `json:"pod"`
	Remote string `json:"remote"`
}

// get fetches url from inside pod p with httpecho -probe.
func (c *cluster) get(p *corev1.Pod, url string) (echo, error) {
	out, err := c.exec(p, "-probe", url)
	if err != nil {
		return echo{}, fmt.Errorf("GET %s from %s: %v: %s", url, p.Name, err, out)
	}
	var e echo
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		return echo{}, fmt.Errorf("answer %q: %v", out, err)
	}
	return e, nil
}

func (c *cluster) clusterIP(name string) string {
	c.t.Helper()
	k, _ := schemas.ByResource("", "v1", "services")
	o, err := c.client().Get(context.Background(), k, "default", name)
	if err != nil {
		c.t.Fatal(err)
	}
	return o.(*corev1.Service).Spec.ClusterIP
}

// node finds a cluster node by name.
func (c *cluster) node(name string) *netnscluster.Node {
	c.t.Helper()
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	c.t.Fatalf("no node %q", name)
	return nil
}

// echoDeployment is a Deployment of httpecho with a readiness probe, and its Service.
func echoDeployment(name string, replicas int, node string) string {
	app := echoapp.App{Name: name, Replicas: replicas}
	if node != "" {
		app.PodSpec = echoapp.OnNode(node)
	}
	return app.Manifest()
}

// placement maps each running pod container's pod UID to the nodes it runs on, from every
// node's containerd.
func (c *cluster) placement() (map[string][]string, error) {
	out := map[string][]string{}
	for _, n := range c.Nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cs, err := n.Running(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("containers on %s: %w", n.Name, err)
		}
		for _, ct := range cs {
			out[ct.PodUID] = append(out[ct.PodUID], n.Name)
		}
	}
	return out, nil
}

// onNode keeps pods bound to node; notOnNode keeps the others.
func onNode(node string) func(*corev1.Pod) error {
	return func(p *corev1.Pod) error {
		if p.Spec.NodeName != node {
			return fmt.Errorf("pod %s on %q, want %s", p.Name, p.Spec.NodeName, node)
		}
		return nil
	}
}

func notOnNode(node string) func(*corev1.Pod) error {
	return func(p *corev1.Pod) error {
		if p.Spec.NodeName == node {
			return fmt.Errorf("pod %s still on %s", p.Name, node)
		}
		return nil
	}
}

// faultOptions detect a failed node within seconds: the fault tests' settings.
var faultOptions = netnscluster.Options{Nodes: 2, NodeGracePeriod: 4 * time.Second, PodEvictionTimeout: 4 * time.Second}

// startWeb starts a fault-test cluster running a two-replica Deployment "web" and returns the
// node of one of its pods, the one to break.
func startWeb(t *testing.T) (*cluster, *netnscluster.Node) {
	t.Helper()
	c := startCluster(t, faultOptions)
	c.apply(echoDeployment("web", 2, ""))
	pods := c.waitPods("app=web", 2, 90*time.Second, nil)
	return c, c.node(pods[0].Spec.NodeName)
}

// elapsed formats a measured duration for the log.
func elapsed(since time.Time) time.Duration { return time.Since(since).Round(10 * time.Millisecond) }
