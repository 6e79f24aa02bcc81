package controlplane_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

func sharedNATS(t *testing.T) *natsserver.Server {
	t.Helper()
	srv, err := natsserver.Start(natsserver.Config{DataDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// keyFiles is the Secrets encryption key file every apiserver replica of one NATS shares.
var keyFiles sync.Map

func sharedKeyFile(t *testing.T, natsURL string) string {
	path, _ := keyFiles.LoadOrStore(natsURL, filepath.Join(t.TempDir(), "encryption.keys"))
	return path.(string)
}

// replica starts one control plane process on an external NATS.
func replica(t *testing.T, natsURL, identity string, mutate func(*controlplane.Config)) *controlplane.ControlPlane {
	t.Helper()
	cfg := controlplane.Config{NATSURL: natsURL, Identity: identity, EncryptionKeyFile: sharedKeyFile(t, natsURL)}
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start %s: %v", identity, err)
	}
	t.Cleanup(cp.Stop)
	return cp
}

func readyNode(t *testing.T, c *apiclient.Client, name string) {
	t.Helper()
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")}
	ctx := context.Background()
	created, err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}})
	if err != nil {
		t.Fatal(err)
	}
	n := created.(*corev1.Node)
	n.Status = corev1.NodeStatus{Capacity: alloc, Allocatable: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	if _, err := c.UpdateStatus(ctx, n); err != nil {
		t.Fatal(err)
	}
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
			},
		},
	}
}

// boundPods waits until the app has want pods, all bound to a node.
func boundPods(t *testing.T, c *apiclient.Client, app string, want int) {
	t.Helper()
	pods, _ := schemas.ByResource("", "v1", "pods")
	testutil.Eventually(t, 20*time.Second, 20*time.Millisecond, func() error {
		objs, _, err := c.List(context.Background(), pods, "default", url.Values{"labelSelector": {"app=" + app}})
		if err != nil {
			return err
		}
		bound := 0
		for _, o := range objs {
			if o.(*corev1.Pod).Spec.NodeName != "" {
				bound++
			}
		}
		if len(objs) != want || bound != want {
			return fmt.Errorf("app %s: %d pods, %d bound; want %d bound", app, len(objs), bound, want)
		}
		return nil
	})
}

// awaitSoleLeader waits until want, of all cps, alone leads every lease.
func awaitSoleLeader(t *testing.T, within time.Duration, leases []string, want *controlplane.ControlPlane, cps ...*controlplane.ControlPlane) {
	t.Helper()
	testutil.Eventually(t, within, 5*time.Millisecond, func() error {
		for _, l := range leases {
			var leaders []string
			for _, cp := range cps {
				if cp.Leading(l) {
					leaders = append(leaders, cp.Identity())
				}
			}
			if len(leaders) != 1 || leaders[0] != want.Identity() {
				return fmt.Errorf("%s: leaders %v, want only %s", l, leaders, want.Identity())
			}
		}
		return nil
	})
}

// Two manager processes (scheduler + controller-manager, no apiserver) contend for their
// leases: only the leader runs the actors; when it dies the standby leads within one lease
// period and keeps scheduling; a leader that stops cleanly hands over at once.
func TestLeaderElectedManagersFailOver(t *testing.T) {
	srv := sharedNATS(t)
	api := replica(t, srv.ClientURL(), "api", func(c *controlplane.Config) { c.Components = []string{controlplane.APIServer} })
	if api.Leading(controlplane.SchedulerLease) || api.Actor("scheduler") != nil || api.Actor("deployment") != nil {
		t.Fatal("an apiserver-only process runs the scheduler or controllers")
	}
	// Short enough for a quick test, long enough that a loaded machine (race detector, shared
	// cores) does not miss renewals.
	const ttl = 2 * time.Second
	manager := func(id string) *controlplane.ControlPlane {
		return replica(t, srv.ClientURL(), id, func(c *controlplane.Config) {
			c.Components = []string{controlplane.Scheduler, controlplane.ControllerManager}
			c.LeaderElect, c.LeaseDuration = true, ttl
		})
	}
	a := manager("a")
	if a.API != nil || a.URL() != "" || a.Actor("apiserver") != nil {
		t.Fatal("a process without the apiserver component serves the API")
	}
	leases := []string{controlplane.SchedulerLease, controlplane.ControllerManagerLease}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		for _, l := range leases {
			if !a.Leading(l) {
				return fmt.Errorf("a does not lead %s", l)
			}
		}
		return nil
	})
	b := manager("b")
	readyNode(t, api.Client, "n1")
	if _, err := api.Client.Create(context.Background(), deployment("web", 3)); err != nil {
		t.Fatal(err)
	}
	boundPods(t, api.Client, "web", 3)
	// b stood by the whole time: it never held a lease nor ran an actor.
	for _, l := range leases {
		if b.Leading(l) {
			t.Fatalf("standby b leads %s while a is alive", l)
		}
	}
	for _, name := range []string{"scheduler", "deployment", "replicaset"} {
		if b.Actor(name) != nil || a.Actor(name) == nil {
			t.Fatalf("actor %s: running on a %v, on b %v; want only on the leader", name, a.Actor(name) != nil, b.Actor(name) != nil)
		}
	}

	// Crash a: its connection dies without releasing the leases.
	killed := time.Now()
	a.Conn.Close()
	awaitSoleLeader(t, 5*ttl, leases, b, a, b)
	took := time.Since(killed)
	t.Logf("standby took over %v after the leader crashed (lease %v)", took.Round(time.Millisecond), ttl)
	// awaitSoleLeader bounds lateness (load); what matters is that b did not lead early.
	if took < ttl/2 {
		t.Fatalf("takeover after %v, before a's lease (%v) could have expired", took, ttl)
	}
	if a.Actor("scheduler") != nil {
		t.Fatal("the crashed leader still runs its scheduler")
	}
	if _, err := api.Client.Create(context.Background(), deployment("after-crash", 2)); err != nil {
		t.Fatal(err)
	}
	boundPods(t, api.Client, "after-crash", 2)

	// A clean stop releases the leases: c takes over well inside a lease period.
	c := manager("c")
	stopped := time.Now()
	b.Stop()
	awaitSoleLeader(t, 5*ttl, leases, c, b, c)
	handover := time.Since(stopped)
	t.Logf("hand-over after a clean stop: %v", handover.Round(time.Millisecond))
	if handover >= ttl {
		t.Fatalf("hand-over after release took %v: c waited for the lease (%v) to expire", handover, ttl)
	}
	if _, err := api.Client.Create(context.Background(), deployment("after-stop", 2)); err != nil {
		t.Fatal(err)
	}
	boundPods(t, api.Client, "after-stop", 2)
}

// Two apiserver replicas on one state log, started at the same moment and serving concurrent
// creates over HTTP: every acknowledged write is visible through both, and no two Services get
// the same ClusterIP.
func TestTwoAPIServerReplicasShareOneLog(t *testing.T) {
	srv := sharedNATS(t)
	cps := make([]*controlplane.ControlPlane, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range cps {
		wg.Go(func() {
			cfg := controlplane.Config{NATSURL: srv.ClientURL(), Listen: "127.0.0.1:0", Components: []string{controlplane.APIServer}, Identity: fmt.Sprint("api-", i),
				EncryptionKeyFile: sharedKeyFile(t, srv.ClientURL())}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cps[i], errs[i] = controlplane.Start(ctx, cfg)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		t.Cleanup(cps[i].Stop)
	}
	const writers, perWriter = 8, 40
	var mu sync.Mutex
	acked := map[string]bool{}
	var failures []string
	for w := range writers {
		c := &apiclient.Client{T: apiclient.HTTP{Server: cps[w%2].URL()}}
		wg.Go(func() {
			for i := range perWriter {
				name := fmt.Sprintf("svc-%d-%d", w, i)
				_, err := c.Create(context.Background(), &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
					Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
				})
				mu.Lock()
				if err != nil {
					failures = append(failures, name+": "+err.Error())
				} else {
					acked[name] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d creates failed, e.g. %s", len(failures), failures[0])
	}
	svcs, _ := schemas.ByResource("", "v1", "services")
	nss, _ := schemas.ByResource("", "v1", "namespaces")
	for i, cp := range cps {
		c := &apiclient.Client{T: apiclient.HTTP{Server: cp.URL()}}
		objs, _, err := c.List(context.Background(), svcs, "default", nil)
		if err != nil {
			t.Fatal(err)
		}
		ips := map[string]string{}
		found := 0
		for _, o := range objs {
			s := o.(*corev1.Service)
			if !strings.HasPrefix(s.Name, "svc-") {
				continue
			}
			found++
			if !acked[s.Name] {
				t.Fatalf("replica %d lists %s, which was never acknowledged", i, s.Name)
			}
			if other, dup := ips[s.Spec.ClusterIP]; dup || s.Spec.ClusterIP == "" {
				t.Fatalf("ClusterIP %q of %s also given to %s", s.Spec.ClusterIP, s.Name, other)
			}
			ips[s.Spec.ClusterIP] = s.Name
		}
		if found != len(acked) {
			t.Fatalf("replica %d lists %d of %d acknowledged Services", i, found, len(acked))
		}
		ns, _, err := c.List(context.Background(), nss, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(ns) != 4 {
			t.Fatalf("replica %d: %d namespaces after a concurrent bootstrap, want the 4 defaults", i, len(ns))
		}
	}
	t.Logf("%d Services created through 2 replicas, all listed by both, %d distinct ClusterIPs", len(acked), len(acked))
	// A Secret sealed by one replica opens in the other: they share the key file.
	a := &apiclient.Client{T: apiclient.HTTP{Server: cps[0].URL()}}
	b := &apiclient.Client{T: apiclient.HTTP{Server: cps[1].URL()}}
	if _, err := a.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		StringData: map[string]string{"password": "hunter2"}}); err != nil {
		t.Fatal(err)
	}
	secrets, _ := schemas.ByResource("", "v1", "secrets")
	got, err := b.Get(context.Background(), secrets, "default", "db")
	if err != nil || string(got.(*corev1.Secret).Data["password"]) != "hunter2" {
		t.Fatalf("the other replica reads the Secret as %v, %v", got, err)
	}
}

// An apiserver on an external NATS with no data dir and no key file would seal Secrets with a
// key kept nowhere; it is refused, naming the field.
func TestExternalNATSAPIServerNeedsAKeyFile(t *testing.T) {
	srv := sharedNATS(t)
	_, err := controlplane.Start(context.Background(), controlplane.Config{NATSURL: srv.ClientURL(), Components: []string{controlplane.APIServer}})
	if err == nil || !strings.Contains(err.Error(), "EncryptionKeyFile") {
		t.Fatalf("err = %v, want one naming EncryptionKeyFile", err)
	}
}

func TestUnknownComponentIsRejected(t *testing.T) {
	_, err := controlplane.Start(context.Background(), controlplane.Config{Components: []string{"apiserver", "shceduler"}})
	if err == nil || !strings.Contains(err.Error(), "components") || !strings.Contains(err.Error(), `"shceduler"`) {
		t.Fatalf("want an error naming the components field and the bad name, got %v", err)
	}
}

// Skiff syncs only the embedded server; turning that off for an external NATS would be
// ignored, so it is refused.
func TestNoFsyncWithExternalNATSIsRejected(t *testing.T) {
	_, err := controlplane.Start(context.Background(), controlplane.Config{NATSURL: "nats://127.0.0.1:1", NoFsync: true})
	if err == nil || !strings.Contains(err.Error(), "NoFsync") || !strings.Contains(err.Error(), "--sync-always") {
		t.Fatalf("want an error naming NoFsync and the NATS server's setting, got %v", err)
	}
}

// An apiserver on a 3-server NATS cluster (state at R3) keeps serving writes when the NATS
// server it is connected to dies.
func TestAPIWritesContinueWhenItsNATSServerDies(t *testing.T) {
	cluster, err := natsserver.StartCluster(3, natsserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Shutdown()
	cp := replica(t, cluster.ClientURLs(), "api", func(c *controlplane.Config) {
		c.Replicas, c.Listen, c.LeaderElect, c.LeaseDuration = 3, "127.0.0.1:0", true, 2*time.Second
	})
	c := &apiclient.Client{T: apiclient.HTTP{Server: cp.URL()}}
	create := func(name string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.Create(ctx, configMap(name))
		if apierrors.IsAlreadyExists(err) {
			return nil // an earlier attempt landed but its answer was lost
		}
		return err
	}
	if err := create("before"); err != nil {
		t.Fatal(err)
	}
	victim := cp.Conn.ConnectedServerName()
	killed := time.Now()
	cluster.Stop(cluster.Index(victim))
	for i := range 20 {
		testutil.Eventually(t, 30*time.Second, 20*time.Millisecond, func() error { return create(fmt.Sprint("after-", i)) })
		if i == 0 {
			t.Logf("first write %v after %s (the apiserver's NATS server) died", time.Since(killed).Round(time.Millisecond), victim)
		}
	}
}
