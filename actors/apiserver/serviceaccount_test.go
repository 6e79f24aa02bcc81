package apiserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

func TestServiceAccountsAreServed(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: cp.URL()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sas := cs.CoreV1().ServiceAccounts("default")
	no := false
	in := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}, AutomountServiceAccountToken: &no,
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}}}
	if _, err := sas.Create(ctx, in, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := sas.Get(ctx, "builder", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID == "" || got.AutomountServiceAccountToken == nil || *got.AutomountServiceAccountToken || got.ImagePullSecrets[0].Name != "registry" {
		t.Fatalf("read back %+v", got)
	}
	_, err = sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name"}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.name") {
		t.Fatalf("bad name: %v; want 422 naming metadata.name", err)
	}
	if _, err := sas.Get(ctx, "Bad_Name", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("refused account was written: %v", err)
	}
	res, err := cs.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.APIResources {
		if r.Name == "serviceaccounts" {
			if !r.Namespaced || len(r.ShortNames) != 1 || r.ShortNames[0] != "sa" || r.Kind != "ServiceAccount" {
				t.Fatalf("discovery: %+v", r)
			}
			return
		}
	}
	t.Fatal("discovery does not list serviceaccounts")
}
