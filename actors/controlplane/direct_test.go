package controlplane_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/schemas"
)

// managers lists an object's managedFields entries as manager/operation/subresource.
func managers(obj any) []string {
	var out []string
	for _, e := range obj.(metav1.Object).GetManagedFields() {
		out = append(out, fmt.Sprintf("%s/%s/%s", e.Manager, e.Operation, e.Subresource))
	}
	slices.Sort(out)
	return out
}

// sameRefusal checks that both ways refused a write with the same API status.
func sameRefusal(t *testing.T, what string, direct, overNATS error) {
	t.Helper()
	if !apierrors.IsForbidden(direct) || !apierrors.IsForbidden(overNATS) {
		t.Fatalf("%s: in process %v, over NATS %v; want 403 both", what, direct, overNATS)
	}
	if direct.Error() != overNATS.Error() {
		t.Errorf("%s: in process %q, over NATS %q", what, direct, overNATS)
	}
}

// With the apiserver in the process, the components call it in process, as the identity they
// have on NATS: RBAC refuses them the same writes, and the writes they make are managed by
// the same names (skiff-<role>) as over NATS.
func TestComponentsCallTheAPIInProcessAsTheirIdentity(t *testing.T) {
	cp := startSecured(t, func(c *controlplane.Config) {
		c.APIAuth.Enabled = true
		c.Components = []string{controlplane.APIServer}
	})
	ctx := context.Background()
	clients := func(role identity.Role) (direct, overNATS *apiclient.Client) {
		t.Helper()
		direct, err := controlplane.ClientFor(cp, role)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := direct.T.(apiclient.Direct); !ok {
			t.Fatalf("%s calls the API through %T, want apiclient.Direct", role, direct.T)
		}
		return direct, joinAs(t, cp, identity.ID{Role: role}).client
	}

	// The scheduler: binds and reports pods, may not create namespaces.
	direct, overNATS := clients(identity.Scheduler)
	ns := []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"not-yours"}}`)
	_, errD := direct.Raw(ctx, http.MethodPost, "/api/v1/namespaces", "application/json", ns)
	_, errN := overNATS.Raw(ctx, http.MethodPost, "/api/v1/namespaces", "application/json", ns)
	sameRefusal(t, "scheduler creates a namespace", errD, errN)
	podKind, _ := schemas.ByResource("", "v1", "pods")
	var pods []any
	for way, c := range map[string]*apiclient.Client{"direct": direct, "nats": overNATS} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + way, Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example/c"}}}}
		if _, err := cp.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		if err := c.Bind(ctx, "default", pod.Name, "n1"); err != nil {
			t.Fatalf("%s: bind: %v", way, err)
		}
		patch := []byte(`{"status":{"conditions":[{"type":"PodScheduled","status":"True"}]}}`)
		if _, err := c.Patch(ctx, podKind, "default", pod.Name, "status", "application/merge-patch+json", patch); err != nil {
			t.Fatalf("%s: status: %v", way, err)
		}
		got, err := cp.Client.Get(ctx, podKind, "default", pod.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(managers(got), "skiff-scheduler/Update/status") {
			t.Errorf("%s: pod managed by %v, want skiff-scheduler's status update among them", way, managers(got))
		}
		pods = append(pods, got)
	}
	if a, b := managers(pods[0]), managers(pods[1]); !slices.Equal(a, b) {
		t.Errorf("managed fields differ: %v and %v", a, b)
	}

	// The controller manager: writes workload kinds, never RBAC.
	direct, overNATS = clients(identity.ControllerManager)
	role := []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"escalate"},"rules":[]}`)
	_, errD = direct.Raw(ctx, http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/clusterroles", "application/json", role)
	_, errN = overNATS.Raw(ctx, http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/clusterroles", "application/json", role)
	sameRefusal(t, "controller manager creates a ClusterRole", errD, errN)
	for way, c := range map[string]*apiclient.Client{"direct": direct, "nats": overNATS} {
		if _, err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + way, Namespace: "default"}, Data: map[string]string{"k": "v"}}); err != nil {
			t.Fatalf("%s: %v", way, err)
		}
		if got := managers(getConfigMap(t, cp, "cm-"+way)); !slices.Equal(got, []string{"skiff-controller-manager/Update/"}) {
			t.Errorf("%s: configmap managed by %v", way, got)
		}
	}

	// The process's own client is the apiserver's in-process caller.
	if _, ok := cp.Client.T.(apiclient.Direct); !ok {
		t.Fatalf("the process's client is %T, want apiclient.Direct", cp.Client.T)
	}
	if _, err := cp.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-own", Namespace: "default"}, Data: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	if got := managers(getConfigMap(t, cp, "cm-own")); !slices.Equal(got, []string{"skiff-apiserver/Update/"}) {
		t.Errorf("own configmap managed by %v", got)
	}
}

func getConfigMap(t *testing.T, cp *controlplane.ControlPlane, name string) any {
	t.Helper()
	k, _ := schemas.ByResource("", "v1", "configmaps")
	obj, err := cp.Client.Get(context.Background(), k, "default", name)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}
