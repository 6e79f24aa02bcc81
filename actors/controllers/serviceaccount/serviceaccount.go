package serviceaccount

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// Names as in Kubernetes.
const (
	Name    = "serviceaccount-controller"
	Default = "default"
)

// New returns the producer of the serviceaccounts controller: a `default` ServiceAccount in
// every namespace.
func New(cfg controllerkit.Config) func() actorkit.Actor {
	p := &perNamespace{
		name:    Name,
		object:  Default,
		nss:     cfg.Informers.For("", "namespaces"),
		objs:    cfg.Informers.For("", "serviceaccounts"),
		workers: cfg.Workers,
		ensure: func(ctx context.Context, ns string, cur runtime.Object) error {
			if cur != nil {
				return nil // kube leaves an existing account as its users edited it
			}
			_, err := cfg.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: Default, Namespace: ns}})
			return err
		},
	}
	return p.producer(cfg)
}
