package serviceaccount

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// The published ConfigMap, as kube-controller-manager's root-ca-cert-publisher writes it.
const (
	RootCAName            = "root-ca-cert-publisher"
	RootCAConfigMap       = "kube-root-ca.crt"
	RootCAKey             = "ca.crt"
	DescriptionAnnotation = "kubernetes.io/description"
	Description           = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
)

// NewRootCAPublisher returns the producer of the root CA publisher: the ConfigMap
// kube-root-ca.crt with key ca.crt = caPEM in every namespace, kept equal to it.
func NewRootCAPublisher(cfg controllerkit.Config, caPEM []byte) func() actorkit.Actor {
	want := map[string]string{RootCAKey: string(caPEM)}
	p := &perNamespace{
		name:    RootCAName,
		object:  RootCAConfigMap,
		nss:     cfg.Informers.For("", "namespaces"),
		objs:    cfg.Informers.For("", "configmaps"),
		workers: cfg.Workers,
		ensure: func(ctx context.Context, ns string, cur runtime.Object) error {
			if cur == nil {
				_, err := cfg.Client.Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: RootCAConfigMap, Namespace: ns, Annotations: map[string]string{DescriptionAnnotation: Description}},
					Data:       want,
				})
				return err
			}
			cm := cur.(*corev1.ConfigMap)
			if maps.Equal(cm.Data, want) && len(cm.BinaryData) == 0 && cm.Annotations[DescriptionAnnotation] != "" {
				return nil
			}
			cm = cm.DeepCopy()
			cm.Data, cm.BinaryData = want, nil
			if cm.Annotations == nil {
				cm.Annotations = map[string]string{}
			}
			cm.Annotations[DescriptionAnnotation] = Description
			_, err := cfg.Client.Update(ctx, cm)
			return err
		},
	}
	return p.producer(cfg)
}
