package controlplane_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/nodeapi"
	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/identity/identitytest"
	"github.com/skiff-sh/skiff/bus/rpc"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

func startSecured(t *testing.T, mutate ...func(*controlplane.Config)) *controlplane.ControlPlane {
	t.Helper()
	dir := t.TempDir()
	cp := testutil.StartControlPlane(t, append([]func(*controlplane.Config){func(c *controlplane.Config) {
		c.DataDir, c.NATSPort, c.NATSAuthDir = dir, -1, filepath.Join(dir, controlplane.NATSKeysDir)
	}}, mutate...)...)
	if !cp.Secured() {
		t.Fatal("control plane is not secured")
	}
	return cp
}

// remoteNode dials the control plane's NATS port the way `skiff agent --nats-creds` does.
type remoteNode struct {
	nc     *nats.Conn
	client *apiclient.Client
	v      identitytest.Violations
}

func joinAsNode(t *testing.T, cp *controlplane.ControlPlane, name string) *remoteNode {
	t.Helper()
	return joinAs(t, cp, identity.NodeID(name))
}

// joinAs dials the control plane's NATS port as id, with credentials cp minted.
func joinAs(t *testing.T, cp *controlplane.ControlPlane, id identity.ID) *remoteNode {
	t.Helper()
	creds, err := cp.Creds(id)
	if err != nil {
		t.Fatal(err)
	}
	n := &remoteNode{}
	opts := append(id.ClientOptions(), nats.UserCredentials(identitytest.WriteCreds(t, creds)), n.v.Option())
	if n.nc, err = nats.Connect(cp.NATS.ClientURL(), opts...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.nc.Close)
	n.client = &apiclient.Client{T: apiclient.NATS{Conn: n.nc, Subject: id.APISubject()}}
	return n
}

// apiserverStream is the state stream seen through the apiserver's own connection.
func apiserverStream(t *testing.T, cp *controlplane.ControlPlane) jetstream.Stream {
	t.Helper()
	js, err := jetstream.New(cp.Conn)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(context.Background(), "STATE")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func nodeObject(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func boundPod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
}

// An agent's credentials read the log and call the API as the node; they cannot write the
// log, touch the stream, or call as anyone else. The in-process controllers work on their own
// users.
func TestSecuredNATSAgentCredentials(t *testing.T) {
	ctx := context.Background()
	cp := startSecured(t)

	// Controllers run as controller-manager: a ReplicaSet gets its pods.
	replicas := int32(2)
	labels := map[string]string{"app": "web"}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	if _, err := cp.Client.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	podKind, _ := schemas.ByResource("", "v1", "pods")
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		pods, _, err := cp.Client.List(ctx, podKind, "default", nil)
		if err != nil || len(pods) != 2 {
			return errors.New("replicaset controller made no pods yet")
		}
		return nil
	})

	n := joinAsNode(t, cp, "node-a")
	if _, err := n.client.Create(ctx, nodeObject("node-a")); err != nil {
		t.Fatalf("node-a registers itself: %v", err)
	}
	log, err := statelog.Open(ctx, n.nc, statelog.Config{ReadOnly: true, ConsumerNames: identity.NodeID("node-a").ConsumerNames()})
	if err != nil {
		t.Fatalf("node opens the log read-only: %v", err)
	}
	defer log.Close()
	if err := log.WaitForRev(ctx, cp.Log.Rev()); err != nil {
		t.Fatal(err)
	}
	nodeKind, _ := schemas.ByResource("", "v1", "nodes")
	if _, err := log.Get(ctx, schemas.StorageKey(nodeKind, "", "node-a"), statelog.ReadOptions{}); err != nil {
		t.Fatalf("node reads its Node from the log: %v", err)
	}

	js, err := jetstream.New(n.nc)
	if err != nil {
		t.Fatal(err)
	}
	before := identitytest.StreamState(t, n.nc)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	// A subject nobody else writes: the controllers keep writing elsewhere meanwhile.
	const evil = "state.k.configmaps.default.evil"
	_, err = js.Publish(short, evil, []byte(`{}`))
	cancel()
	if err == nil {
		t.Fatal("node credentials published to the state log")
	}
	n.v.Wait(t, evil)
	if m, err := apiserverStream(t, cp).GetLastMsgForSubject(ctx, evil); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("the log holds the node's write: %v, %v", m, err)
	}
	if err := n.nc.Publish("$JS.API.STREAM.PURGE.STATE", nil); err != nil {
		t.Fatal(err)
	}
	n.v.Wait(t, "$JS.API.STREAM.PURGE.STATE")
	if after := identitytest.StreamState(t, n.nc); after.FirstSeq != before.FirstSeq || after.Msgs < before.Msgs {
		t.Fatalf("the log was purged under node credentials: %+v -> %+v", before, after)
	}

	// The apiserver reaches the node API of node-a (served on node-a's own user, answered
	// through its response permission); node-a cannot serve node-b's.
	sub, err := rpc.Serve(n.nc, nodeapi.ExecSubject("node-a"), "", nodeapi.Handle(func(_ context.Context, r nodeapi.ExecRequest) (nodeapi.ExecReply, error) {
		return nodeapi.ExecReply{Stdout: []byte("exec in " + r.PodUID)}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := n.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var rep nodeapi.ExecReply
	if err := nodeapi.Call(ctx, cp.Conn, nodeapi.ExecSubject("node-a"), nodeapi.ExecRequest{PodUID: "u1"}, &rep); err != nil || string(rep.Stdout) != "exec in u1" {
		t.Fatalf("apiserver -> node-a exec: %q, %v", rep.Stdout, err)
	}
	if _, err := n.nc.SubscribeSync(nodeapi.ExecSubject("node-b")); err != nil {
		t.Fatal(err)
	}
	n.v.Wait(t, nodeapi.ExecSubject("node-b"))
}

// Node b's credentials cannot change a pod bound to node a (NodeRestriction reads the NATS
// identity); node a can.
func TestSecuredNATSNodeCannotTouchAnotherNodesPod(t *testing.T) {
	ctx := context.Background()
	cp := startSecured(t)
	a, b := joinAsNode(t, cp, "node-a"), joinAsNode(t, cp, "node-b")
	for _, n := range []struct {
		c    *apiclient.Client
		name string
	}{{a.client, "node-a"}, {b.client, "node-b"}} {
		if _, err := n.c.Create(ctx, nodeObject(n.name)); err != nil {
			t.Fatalf("%s registers itself: %v", n.name, err)
		}
	}
	created, err := cp.Client.Create(ctx, boundPod("p", "node-a"))
	if err != nil {
		t.Fatal(err)
	}
	pod := created.(*corev1.Pod)
	pod.Status.Phase = corev1.PodRunning
	_, err = b.client.UpdateStatus(ctx, pod.DeepCopy())
	if !apierrors.IsForbidden(err) {
		t.Fatalf("node-b updating node-a's pod status: %v, want 403 Forbidden", err)
	}
	podKind, _ := schemas.ByResource("", "v1", "pods")
	got, err := cp.Client.Get(ctx, podKind, "default", "p")
	if err != nil {
		t.Fatal(err)
	}
	if rv := got.(*corev1.Pod).ResourceVersion; rv != pod.ResourceVersion {
		t.Fatalf("the pod was written (revision %s -> %s)", pod.ResourceVersion, rv)
	}
	if _, err := a.client.UpdateStatus(ctx, pod.DeepCopy()); err != nil {
		t.Fatalf("node-a updating its own pod's status: %v", err)
	}
}

// A scheduler replica in another process joins with scheduler credentials: it opens the log
// read-only, wins its lease and calls the API as the scheduler.
func TestSecuredNATSSchedulerReplica(t *testing.T) {
	ctx := context.Background()
	cp := startSecured(t)
	creds, err := cp.Creds(identity.ID{Role: identity.Scheduler})
	if err != nil {
		t.Fatal(err)
	}
	file := identitytest.WriteCreds(t, creds)
	replica, err := controlplane.Start(ctx, controlplane.Config{NATSURL: cp.NATS.ClientURL(), NATSCreds: file,
		Components: []string{controlplane.Scheduler}, LeaderElect: true, LeaseDuration: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Stop()
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		if !replica.Leading(controlplane.SchedulerLease) {
			return errors.New("the scheduler replica does not lead")
		}
		return nil
	})
	if _, err := replica.Log.Create(ctx, "configmaps/default/x", []byte(`{}`), nil); !errors.Is(err, statelog.ErrReadOnly) {
		t.Fatalf("replica's log write: %v, want ErrReadOnly", err)
	}
	if _, err := replica.Client.Create(ctx, configMap("from-scheduler")); err != nil {
		t.Fatalf("scheduler calls the API: %v", err)
	}
	// Scheduler credentials cannot run the controllers (one identity per process).
	if _, err := controlplane.Start(ctx, controlplane.Config{NATSURL: cp.NATS.ClientURL(), NATSCreds: file,
		Components: []string{controlplane.Scheduler, controlplane.ControllerManager}}); err == nil || !strings.Contains(err.Error(), "components") {
		t.Fatalf("scheduler+controllers on one credentials file: %v, want an error naming components", err)
	}
}
