package controlplane_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/skiff-sh/skiff/actors/apiserver/authn/serviceaccount"
	sacontroller "github.com/skiff-sh/skiff/actors/controllers/serviceaccount"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// saCluster is a secured control plane with every controller, and client-go as its admin.
type saCluster struct {
	cp    *controlplane.ControlPlane
	admin *kubernetes.Clientset
}

func startSACluster(t *testing.T, mutate ...func(*controlplane.Config)) saCluster {
	t.Helper()
	cp := startSecured(t, append([]func(*controlplane.Config){func(c *controlplane.Config) { c.APIAuth.Enabled = true }}, mutate...)...)
	pki := cp.PKI()
	cfg := &rest.Config{Host: cp.URL(), TLSClientConfig: rest.TLSClientConfig{CAData: pki.CAPEM, CertData: pki.AdminCertPEM, KeyData: pki.AdminKeyPEM}}
	return saCluster{cp: cp, admin: kubernetes.NewForConfigOrDie(cfg)}
}

// as is a client presenting token, trusting the cluster's CA only.
func (c saCluster) as(token string) *kubernetes.Clientset {
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: c.cp.URL(), BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: c.cp.PKI().CAPEM}})
}

// until watches the named object until cond holds for it (or it is absent, obj == nil).
func until[T runtime.Object](t *testing.T, ctx context.Context, rc rest.Interface, resource, ns, name string, cond func(obj T, present bool) bool) {
	t.Helper()
	var zero T
	lw := cache.NewListWatchFromClient(rc, resource, ns, fields.OneTermEqualSelector("metadata.name", name))
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := watchtools.UntilWithSync(ctx, lw, zero, func(store cache.Store) (bool, error) {
		o, ok, err := store.GetByKey(ns + "/" + name)
		if err != nil || !ok {
			return cond(zero, false), err
		}
		return cond(o.(T), true), nil
	}, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Deleted {
			return cond(zero, false), nil
		}
		o, ok := ev.Object.(T)
		return ok && cond(o, true), nil
	})
	if err != nil {
		t.Fatalf("%s %s/%s: %v", resource, ns, name, err)
	}
}

func mkNamespace(t *testing.T, ctx context.Context, cs *kubernetes.Clientset, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestEveryNamespaceGetsADefaultServiceAccountAndTheRootCA(t *testing.T) {
	c := startSACluster(t)
	ctx := context.Background()
	mkNamespace(t, ctx, c.admin, "team")
	rc := c.admin.CoreV1().RESTClient()
	until(t, ctx, rc, "serviceaccounts", "team", "default", func(_ *corev1.ServiceAccount, ok bool) bool { return ok })
	wantCA := string(c.cp.PKI().CAPEM)
	hasCA := func(cm *corev1.ConfigMap, ok bool) bool {
		return ok && cm.Data["ca.crt"] == wantCA && cm.Annotations[sacontroller.DescriptionAnnotation] != ""
	}
	until(t, ctx, rc, "configmaps", "team", "kube-root-ca.crt", hasCA)
	until(t, ctx, rc, "configmaps", "kube-system", "kube-root-ca.crt", hasCA)

	// Deleted, both come back; an edited CA is put back.
	if err := c.admin.CoreV1().ServiceAccounts("team").Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, ctx, rc, "serviceaccounts", "team", "default", func(_ *corev1.ServiceAccount, ok bool) bool { return ok })
	cm, err := c.admin.CoreV1().ConfigMaps("team").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["ca.crt"] = "forged"
	if _, err := c.admin.CoreV1().ConfigMaps("team").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, ctx, rc, "configmaps", "team", "kube-root-ca.crt", hasCA)
	if err := c.admin.CoreV1().ConfigMaps("team").Delete(ctx, "kube-root-ca.crt", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, ctx, rc, "configmaps", "team", "kube-root-ca.crt", hasCA)
}

func createToken(t *testing.T, ctx context.Context, cs *kubernetes.Clientset, ns, sa string, spec authenticationv1.TokenRequestSpec) string {
	t.Helper()
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// A token of TokenRequest is its account's identity: the account's Role lets it list pods in
// its namespace and nothing else; it stops working with what it is bound to.
func TestTokenRequestAuthenticatesAsTheServiceAccount(t *testing.T) {
	c := startSACluster(t)
	ctx := context.Background()
	mkNamespace(t, ctx, c.admin, "app")
	sa, err := c.admin.CoreV1().ServiceAccounts("app").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}}
	if _, err := c.admin.RbacV1().Roles("app").Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: "app"}}}
	if _, err := c.admin.RbacV1().RoleBindings("app").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := c.admin.CoreV1().ServiceAccounts("app").CreateToken(ctx, "reader", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Until(tr.Status.ExpirationTimestamp.Time); got < 59*time.Minute || got > 61*time.Minute || *tr.Spec.ExpirationSeconds != 3600 ||
		len(tr.Spec.Audiences) != 1 || tr.Spec.Audiences[0] != serviceaccount.DefaultIssuer {
		t.Fatalf("defaults: expires in %v, spec %+v", got, tr.Spec)
	}
	reader := c.as(tr.Status.Token)
	if _, err := reader.CoreV1().Pods("app").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list pods in its namespace: %v", err)
	}
	_, err = reader.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "system:serviceaccount:app:reader" cannot list resource "pods"`) {
		t.Fatalf("outside its Role: %v; want 403 naming the account", err)
	}
	_, err = reader.CoreV1().Secrets("app").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("secrets: %v; want 403", err)
	}

	// Bad requests are refused naming the field.
	_, err = c.admin.CoreV1().ServiceAccounts("app").CreateToken(ctx, "reader", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(60))}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.expirationSeconds") {
		t.Fatalf("60 s token: %v; want 422 naming spec.expirationSeconds", err)
	}
	if _, err = c.admin.CoreV1().ServiceAccounts("app").CreateToken(ctx, "nobody", &authenticationv1.TokenRequest{}, metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("token of a missing account: %v; want 404", err)
	}

	// Another audience is not for this API.
	other := createToken(t, ctx, c.admin, "app", "reader", authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}})
	if _, err := c.as(other).CoreV1().Pods("app").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("audience vault: %v; want 401", err)
	}
	// TokenReview checks for the audiences it names (else the API's) and reports the match,
	// as a vault or another relying party asks.
	review := func(token string, audiences ...string) authenticationv1.TokenReviewStatus {
		t.Helper()
		rv, err := c.admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rv.Status
	}
	if st := review(other, "vault", "elsewhere"); !st.Authenticated || fmt.Sprint(st.Audiences) != "[vault]" || st.User.Username != "system:serviceaccount:app:reader" {
		t.Fatalf("TokenReview of the vault token for vault: %+v", st)
	}
	if st := review(other); st.Authenticated {
		t.Fatalf("TokenReview of the vault token for the API: %+v, want unauthenticated", st)
	}
	if st := review(tr.Status.Token); !st.Authenticated || fmt.Sprint(st.Audiences) != "["+serviceaccount.DefaultIssuer+"]" {
		t.Fatalf("TokenReview of an API token: %+v, want the API's audience", st)
	}

	// Bound to a pod: valid while the pod is, refused once it is gone.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{ServiceAccountName: "reader", Containers: []corev1.Container{{Name: "c", Image: "skiff.local/httpecho:v1"}}}}
	if pod, err = c.admin.CoreV1().Pods("app").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bound := createToken(t, ctx, c.admin, "app", "reader", authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p", UID: pod.UID}})
	claims := verifyWithJWKS(t, ctx, c, reader, bound)
	if claims.Kubernetes.Pod.UID != string(pod.UID) || claims.Kubernetes.ServiceAccount.UID != string(sa.UID) || claims.Kubernetes.Namespace != "app" {
		t.Fatalf("claims %+v", claims.Kubernetes)
	}
	if _, err := c.as(bound).CoreV1().Pods("app").Get(ctx, "p", metav1.GetOptions{}); err != nil {
		t.Fatalf("pod-bound token: %v", err)
	}
	if err := c.admin.CoreV1().Pods("app").Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	until(t, ctx, c.admin.CoreV1().RESTClient(), "pods", "app", "p", func(_ *corev1.Pod, ok bool) bool { return !ok })
	if _, err := c.as(bound).CoreV1().Pods("app").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("token of a deleted pod: %v; want 401", err)
	}

	// Expired: signed with the cluster's own key, an hour ago.
	key, err := serviceaccount.LoadOrCreateKey(filepath.Join(c.cp.DataDir(), serviceaccount.KeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	iss, err := serviceaccount.NewIssuer("", key)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	expired, err := iss.Mint(serviceaccount.Claims{Audiences: iss.Audiences, IssuedAt: old, Expiry: old.Add(time.Hour), Namespace: "app",
		ServiceAccount: serviceaccount.Ref{Name: "reader", UID: string(sa.UID)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.as(expired).CoreV1().Pods("app").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("expired token: %v; want 401", err)
	}

	// The account deleted and made again is another account: the old token is refused.
	if err := c.admin.CoreV1().ServiceAccounts("app").Delete(ctx, "reader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.CoreV1().ServiceAccounts("app").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.CoreV1().Pods("app").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("token of a replaced account: %v; want 401", err)
	}
}

type kubeClaims struct {
	jwt.Claims
	Kubernetes struct {
		Namespace      string              `json:"namespace"`
		ServiceAccount serviceaccount.Ref  `json:"serviceaccount"`
		Pod            *serviceaccount.Ref `json:"pod"`
	} `json:"kubernetes.io"`
}

// verifyWithJWKS checks token as an outside party would: discovery, then the JWKS it names,
// read by an account (kube lets every account read them), then the signature.
func verifyWithJWKS(t *testing.T, ctx context.Context, c saCluster, as *kubernetes.Clientset, token string) kubeClaims {
	t.Helper()
	disc, err := as.RESTClient().Get().AbsPath(serviceaccount.DiscoveryPath).DoRaw(ctx)
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	var d struct {
		Issuer  string   `json:"issuer"`
		JWKSURI string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := json.Unmarshal(disc, &d); err != nil || d.Issuer != serviceaccount.DefaultIssuer || d.JWKSURI != d.Issuer+serviceaccount.JWKSPath || d.Algs[0] != "ES256" {
		t.Fatalf("discovery %s: %v", disc, err)
	}
	raw, err := as.RESTClient().Get().AbsPath(serviceaccount.JWKSPath).DoRaw(ctx)
	if err != nil {
		t.Fatalf("jwks: %v", err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("jwks %s: %v", raw, err)
	}
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	if tok.Headers[0].KeyID != set.Keys[0].KeyID {
		t.Fatalf("token kid %q, JWKS kid %q", tok.Headers[0].KeyID, set.Keys[0].KeyID)
	}
	var cl kubeClaims
	if err := tok.Claims(set.Keys[0].Key, &cl); err != nil {
		t.Fatalf("signature does not verify with the JWKS: %v", err)
	}
	if cl.Issuer != d.Issuer || cl.Subject != "system:serviceaccount:app:reader" || cl.Kubernetes.Pod == nil {
		t.Fatalf("claims %+v", cl)
	}
	// Without credentials nobody reads them (kube binds the role to accounts only).
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.cp.PKI().CertPool()}}}
	resp, err := hc.Get(c.cp.URL() + serviceaccount.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous JWKS: %d", resp.StatusCode)
	}
	return cl
}

func ptr[T any](v T) *T { return &v }

// `kubectl create token` (stock kubectl) gets a token the API takes as the account.
func TestKubectlCreateToken(t *testing.T) {
	c := startSACluster(t)
	ctx := context.Background()
	dir := t.TempDir()
	pki := c.cp.PKI()
	for name, data := range map[string][]byte{"ca.crt": pki.CAPEM, "admin.crt": pki.AdminCertPEM, "admin.key": pki.AdminKeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster: {server: " + c.cp.URL() + ", certificate-authority: " + filepath.Join(dir, "ca.crt") +
		"}\nusers:\n- name: u\n  user: {client-certificate: " + filepath.Join(dir, "admin.crt") + ", client-key: " + filepath.Join(dir, "admin.key") +
		"}\ncontexts:\n- name: c\n  context: {cluster: s, user: u, namespace: default}\ncurrent-context: c\n"
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	until(t, ctx, c.admin.CoreV1().RESTClient(), "serviceaccounts", "default", "default", func(_ *corev1.ServiceAccount, ok bool) bool { return ok })
	cmd := exec.CommandContext(ctx, testutil.BuildBinary(t, "./services/kubectl"), "create", "token", "default", "--duration", "20m", "--audience", serviceaccount.DefaultIssuer)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HOME="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl create token: %v\n%s", err, out)
	}
	sa := c.as(strings.TrimSpace(string(out)))
	_, err = sa.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "system:serviceaccount:default:default"`) {
		t.Fatalf("as the token: %v; want 403 naming system:serviceaccount:default:default (authenticated, no Role)", err)
	}
}

// In-cluster clients dial the kubernetes Service's ClusterIP (rest.InClusterConfig) or its DNS
// names and check them against kube-root-ca.crt: the serving certificate covers all of them.
func TestServingCertificateCoversTheKubernetesService(t *testing.T) {
	c := startSACluster(t, func(c *controlplane.Config) { c.ServiceCIDR = "10.97.0.0/16" })
	leaf, err := x509.ParseCertificate(c.cp.PKI().Server.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"10.97.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: c.cp.PKI().CertPool()}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
