package kubelet_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/kubelet"
	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// A real pod mounting a projected volume with a serviceAccountToken, the kube-root-ca.crt
// ConfigMap and its namespace (what kube-api-access holds) reads all three; the token, asked
// for by the kubelet as its node, authenticates as the pod's service account.
func TestProjectedTokenVolumeOnARealNode(t *testing.T) {
	dir := t.TempDir()
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) {
		c.DataDir, c.NATSPort, c.NATSAuthDir, c.APIAuth.Enabled = dir, -1, filepath.Join(dir, controlplane.NATSKeysDir), true
		c.Components = []string{controlplane.APIServer, controllers.ServiceAccount, controllers.RootCAPublisher}
	})
	nc, err := cp.ConnectNode(nodeName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	h := startOn(t, cp, func(c *kubelet.Config) {
		c.Client = &apiclient.Client{T: apiclient.NATS{Conn: nc, Subject: identity.NodeID(nodeName).APISubject()}}
	})
	wait(t, 30*time.Second, func() error { // the controllers make both
		_, errSA := cp.Client.Get(ctx(t), controllerkit.MustKind("", "serviceaccounts"), "default", "default")
		_, errCM := cp.Client.Get(ctx(t), controllerkit.MustKind("", "configmaps"), "default", "kube-root-ca.crt")
		return errors.Join(errSA, errCM)
	})
	h.create(pod("tok", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "api", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(int64(3607))}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "api", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}
	}))
	p := h.waitPod("tok", 60*time.Second, runningReady)
	read := func(name string) string {
		t.Helper()
		s, err := h.cat(p, "/var/run/secrets/kubernetes.io/serviceaccount/"+name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if ns := read("namespace"); ns != "default" {
		t.Errorf("namespace %q", ns)
	}
	if ca := read("ca.crt"); !strings.HasPrefix(ca, "-----BEGIN CERTIFICATE-----") {
		t.Errorf("ca.crt %q", ca)
	}
	body, _ := json.Marshal(&authenticationv1.TokenReview{TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"},
		Spec: authenticationv1.TokenReviewSpec{Token: read("token")}})
	out, err := cp.Client.Raw(ctx(t), http.MethodPost, "/apis/authentication.k8s.io/v1/tokenreviews", "application/json", body)
	if err != nil {
		t.Fatal(err)
	}
	var r authenticationv1.TokenReview
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if !r.Status.Authenticated || r.Status.User.Username != "system:serviceaccount:default:default" {
		t.Fatalf("token review %+v", r.Status)
	}
}
