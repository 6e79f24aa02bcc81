package kubelet

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// The kubelet resolves secretKeyRef and configMapKeyRef through the API as its node, which
// gets what its pods reference and nothing else.
func TestEnvFromSecretsAndConfigMapsAsTheNode(t *testing.T) {
	ctx := context.Background()
	cp := apiServerWithAuth(t)
	ref := func(kind, name, key string, optional bool) *corev1.EnvVarSource {
		o := &optional
		if kind == "secret" {
			return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: o}}
		}
		return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: o}}
	}
	pod := func(name, node string, env ...corev1.EnvVar) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "i", Env: env}}}}
	}
	web := pod("web", "n1",
		corev1.EnvVar{Name: "PW", ValueFrom: ref("secret", "db", "password", false)},
		corev1.EnvVar{Name: "MODE", ValueFrom: ref("configmap", "cfg", "mode", false)},
		corev1.EnvVar{Name: "OPT", ValueFrom: ref("secret", "absent", "x", true)},
		corev1.EnvVar{Name: "URL", Value: "db://$(PW)@host"})
	stolen := pod("thief", "n1", corev1.EnvVar{Name: "T", ValueFrom: ref("secret", "theirs", "password", false)})
	for _, o := range []runtime.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"}, StringData: map[string]string{"password": "hunter2"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: "default"}, StringData: map[string]string{"password": "x"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}, Data: map[string]string{"mode": "fast"}},
		web, pod("other", "n2", corev1.EnvVar{Name: "T", ValueFrom: ref("secret", "theirs", "password", false)}),
	} {
		if _, err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	k := &kubelet{client: asNode(t, cp, "n1"), cfg: Config{NodeIP: "10.0.0.1"}}
	env, _, err := k.containerEnv(ctx, web, &web.Spec.Containers[0], "10.1.0.5")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"PW=hunter2", "MODE=fast", "URL=db://hunter2@host"}; !slices.Equal(env, want) {
		t.Fatalf("env %q, want %q", env, want)
	}
	// A pod that names another node's Secret (not bound to n1 by the API): the read is refused.
	_, _, err = k.containerEnv(ctx, stolen, &stolen.Spec.Containers[0], "10.1.0.6")
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "env T") {
		t.Fatalf("env of a Secret no pod of n1 references: %v, want 403 naming env T", err)
	}
}

// apiServerWithAuth is an apiserver alone with API auth on (RBAC, the node authorizer, a
// service account issuer), on a secured embedded NATS.
func apiServerWithAuth(t *testing.T) *controlplane.ControlPlane {
	dir := t.TempDir()
	return testutil.StartControlPlane(t, func(c *controlplane.Config) {
		c.DataDir, c.NATSPort, c.NATSAuthDir, c.APIAuth.Enabled = dir, -1, filepath.Join(dir, controlplane.NATSKeysDir), true
		c.Components = []string{controlplane.APIServer}
	})
}

// asNode is an API client as node name, over NATS, as a joined kubelet has.
func asNode(t *testing.T, cp *controlplane.ControlPlane, name string) *apiclient.Client {
	nc, err := cp.ConnectNode(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return &apiclient.Client{T: apiclient.NATS{Conn: nc, Subject: identity.NodeID(name).APISubject()}}
}
