package controlplane_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/apiserver/encryption"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// startAsUp is a control plane secured as `skiff up` runs it: NATS users per component, and
// HTTPS with authentication and RBAC on the API.
func startAsUp(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	return startSecured(t, func(c *controlplane.Config) { c.APIAuth.Enabled = true })
}

func secret(name, password string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, StringData: map[string]string{"password": password}}
}

func claim(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
}

// What a node reads off the state stream of Secrets is ciphertext, under the only consumer
// names its credentials allow; an ordered consumer (a random name) is refused outright.
func TestNodeSeesOnlyCiphertextOfSecrets(t *testing.T) {
	ctx := context.Background()
	cp := startAsUp(t)
	for _, s := range []*corev1.Secret{secret("db", "hunter2"), {ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "kube-system"},
		StringData: map[string]string{"token": "s3cr3t-t0ken"}}} {
		if _, err := cp.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	n := joinAsNode(t, cp, "node-a")
	js, err := jetstream.New(n.nc)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	oc, err := js.OrderedConsumer(short, "STATE", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"state.k.core.secrets.>"}, MaxResetAttempts: 1})
	if err == nil {
		if _, err = oc.Fetch(1, jetstream.FetchMaxWait(time.Second)); err == nil {
			t.Fatal("a node read the Secrets through an ordered consumer")
		}
	}
	// The ordered consumer's random name is none of the node's.
	testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if !strings.Contains(n.v.String(), `Publish to \"$JS.API.CONSUMER.CREATE.STATE.`) {
			return errors.New("no violation for the ordered consumer's create: " + n.v.String())
		}
		return nil
	})
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	cons, err := js.CreateConsumer(cctx, "STATE", jetstream.ConsumerConfig{Name: identity.NodeID("node-a").ConsumerNames()[0],
		FilterSubject: "state.k.core.secrets.>", AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true})
	if err != nil {
		t.Fatalf("a consumer under the node's own name: %v", err)
	}
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		got++
		for _, plain := range []string{"hunter2", "aHVudGVyMg", "s3cr3t-t0ken", "czNjcjN0LXQwa2Vu", `"data"`} {
			if bytes.Contains(m.Data(), []byte(plain)) {
				t.Fatalf("%s on the stream holds %q: %q", m.Subject(), plain, m.Data())
			}
		}
		if !encryption.Encrypted(m.Data()) {
			t.Fatalf("%s is not sealed: %q", m.Subject(), m.Data())
		}
		t.Logf("%s: %d bytes, %q...", m.Subject(), len(m.Data()), m.Data()[:24])
	}
	if got != 2 {
		t.Fatalf("read %d Secrets off the stream, want 2 (%v)", got, batch.Error())
	}
	// Readers in the apiserver's process get plaintext: the view, and the API.
	k, _ := schemas.ByResource("", "v1", "secrets")
	o, err := cp.Client.Get(ctx, k, "default", "db")
	if err != nil || string(o.(*corev1.Secret).Data["password"]) != "hunter2" {
		t.Fatalf("the API reads %v, %v", o, err)
	}
}

// A Secret written before encryption (plaintext in the log) stays readable and is sealed when
// next written.
func TestPlaintextSecretIsSealedOnNextWrite(t *testing.T) {
	ctx := context.Background()
	cp := startAsUp(t)
	js, err := jetstream.New(cp.Conn)
	if err != nil {
		t.Fatal(err)
	}
	const subj = "state.k.core.secrets.default.legacy"
	legacy := `{"metadata":{"name":"legacy","namespace":"default","uid":"u-legacy","creationTimestamp":"2026-01-01T00:00:00Z"},"type":"Opaque","data":{"password":"b2xk"}}`
	ack, err := js.Publish(ctx, subj, []byte(legacy))
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Log.WaitForRev(ctx, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	k, _ := schemas.ByResource("", "v1", "secrets")
	o, err := cp.Client.Get(ctx, k, "default", "legacy")
	if err != nil || string(o.(*corev1.Secret).Data["password"]) != "old" {
		t.Fatalf("plaintext Secret reads %v, %v", o, err)
	}
	// Written back unchanged (what `kubectl replace` of every Secret does): sealed now.
	if _, err := cp.Client.Update(ctx, o); err != nil {
		t.Fatal(err)
	}
	st, _ := js.Stream(ctx, "STATE")
	m, err := st.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		t.Fatal(err)
	}
	if m.Sequence == ack.Sequence || !encryption.Encrypted(m.Data) || bytes.Contains(m.Data, []byte("b2xk")) {
		t.Fatalf("Secret written back is stored at %d (plaintext at %d) as %q", m.Sequence, ack.Sequence, m.Data)
	}
	o, err = cp.Client.Get(ctx, k, "default", "legacy")
	if err != nil || string(o.(*corev1.Secret).Data["password"]) != "old" {
		t.Fatalf("sealed Secret reads %v, %v", o, err)
	}
	// Now current: another unchanged write writes nothing.
	rev := cp.Log.Rev()
	if _, err := cp.Client.Update(ctx, o); err != nil {
		t.Fatal(err)
	}
	if m, _ := st.GetLastMsgForSubject(ctx, subj); m.Sequence > rev {
		t.Fatalf("a no-op update of a sealed Secret was written (rev %d > %d)", m.Sequence, rev)
	}
}

// The node authorizer: a node gets a Secret or ConfigMap only while a pod bound to it names
// it; anything else, and any list, is 403.
func TestNodeGetsOnlyItsPodsSecrets(t *testing.T) {
	ctx := context.Background()
	cp := startAsUp(t)
	mine := boundPod("web", "node-a")
	mine.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
	mine.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}}
	mine.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}
	mine.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	theirs := boundPod("api", "node-b")
	theirs.Spec.Volumes = []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls"}}}}
	for _, o := range []runtime.Object{secret("db", "hunter2"), secret("pull", "p"), secret("tls", "t"), secret("lonely", "l"),
		configMap("cfg"), configMap("unused"), claim("data"), claim("other"), mine, theirs} {
		if _, err := cp.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	a, b := joinAsNode(t, cp, "node-a"), joinAsNode(t, cp, "node-b")
	secrets, _ := schemas.ByResource("", "v1", "secrets")
	cms, _ := schemas.ByResource("", "v1", "configmaps")
	pvcs, _ := schemas.ByResource("", "v1", "persistentvolumeclaims")
	allowed := []struct {
		n    *remoteNode
		k    *schemas.Kind
		name string
	}{{a, secrets, "db"}, {a, secrets, "pull"}, {a, cms, "cfg"}, {b, secrets, "tls"}, {a, pvcs, "data"}}
	for _, c := range allowed {
		if _, err := c.n.client.Get(ctx, c.k, "default", c.name); err != nil {
			t.Errorf("%s of a pod bound to the node: %v", c.name, err)
		}
	}
	o, err := a.client.Get(ctx, secrets, "default", "db")
	if err != nil || string(o.(*corev1.Secret).Data["password"]) != "hunter2" {
		t.Fatalf("node-a reads db as %v, %v", o, err)
	}
	denied := []struct {
		n       *remoteNode
		k       *schemas.Kind
		name    string
		message string
	}{
		{a, secrets, "tls", `secrets "tls" is forbidden: User "system:node:node-a" cannot get resource "secrets" in API group "" in the namespace "default": no relationship found between node 'node-a' and this object`},
		{a, secrets, "lonely", "no relationship found between node 'node-a' and this object"},
		{b, secrets, "db", "no relationship found between node 'node-b' and this object"},
		{a, cms, "unused", "no relationship found between node 'node-a' and this object"},
		{a, pvcs, "other", "no relationship found between node 'node-a' and this object"},
		{b, pvcs, "data", "no relationship found between node 'node-b' and this object"},
	}
	for _, c := range denied {
		_, err := c.n.client.Get(ctx, c.k, "default", c.name)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), c.message) {
			t.Errorf("%s: %v, want 403 %q", c.name, err, c.message)
		}
	}
	if _, _, err := a.client.List(ctx, secrets, "default", nil); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "can only get individual resources of this type") {
		t.Errorf("node lists secrets: %v, want 403", err)
	}
	// A pod bound a moment ago counts at once (the authorizer asks the log when its cache
	// lags); once the pod is gone, so is the grant.
	late := boundPod("late", "node-a")
	late.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "lonely"}}}}
	if _, err := cp.Client.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.Get(ctx, secrets, "default", "lonely"); err != nil {
		t.Fatalf("secret of a pod just bound: %v", err)
	}
	pods, _ := schemas.ByResource("", "v1", "pods")
	zero := int64(0)
	if err := cp.Client.Delete(ctx, pods, "default", "late", &metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		if _, err := a.client.Get(ctx, secrets, "default", "lonely"); !apierrors.IsForbidden(err) {
			return errors.New("still readable after its pod was deleted")
		}
		return nil
	})
}
