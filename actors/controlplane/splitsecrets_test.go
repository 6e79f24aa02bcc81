package controlplane_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// A controller-manager apart from the apiservers has no key to the Secrets sealed in the log:
// it reads them through the API, so its garbage collector still finds their owners.
func TestSeparateControllerManagerCollectsSecrets(t *testing.T) {
	srv := sharedNATS(t)
	api := replica(t, srv.ClientURL(), "api", func(c *controlplane.Config) { c.Components = []string{controlplane.APIServer} })
	replica(t, srv.ClientURL(), "manager", func(c *controlplane.Config) {
		c.Components, c.EncryptionKeyFile = []string{controlplane.ControllerManager}, ""
	})
	ctx := context.Background()
	owner, err := api.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	om := owner.(*corev1.ConfigMap)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "owned", Namespace: "default", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: om.Name, UID: om.UID}}}, StringData: map[string]string{"k": "v"}}
	if _, err := api.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	k, _ := schemas.ByResource("", "v1", "configmaps")
	if err := api.Client.Delete(ctx, k, "default", "owner", nil); err != nil {
		t.Fatal(err)
	}
	sk, _ := schemas.ByResource("", "v1", "secrets")
	testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
		if _, err := api.Client.Get(ctx, sk, "default", "owned"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Secret owned by a deleted ConfigMap: %v, want it collected", err)
		}
		return nil
	})
}
