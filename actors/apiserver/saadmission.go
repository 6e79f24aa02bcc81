package apiserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/skiff-sh/skiff/schemas"
)

// ServiceAccountAdmission configures kube's ServiceAccount admission plugin.
type ServiceAccountAdmission struct {
	// Automount adds the kube-api-access-<suffix> projected volume (token, CA, namespace) to
	// pods that do not opt out, mounted in every container at TokenMountPath.
	Automount bool
}

// What the plugin writes, as Kubernetes names it.
const (
	DefaultServiceAccount = "default"
	TokenVolumePrefix     = "kube-api-access-"
	TokenMountPath        = "/var/run/secrets/kubernetes.io/serviceaccount"
	// tokenVolumeSeconds is kube's WarnOnlyBoundTokenExpirationSeconds: one hour and seven
	// seconds, which tells the apiserver the token came from this volume.
	tokenVolumeSeconds  = 3607
	mirrorPodAnnotation = "kubernetes.io/config.mirror"
	// defaultAccountAttempts reads of a missing `default`, 100-200 ms apart (kube's numbers).
	defaultAccountAttempts = 10
)

// admitServiceAccount runs on pod creates: a pod without serviceAccountName runs as
// `default`; a pod naming an account that does not exist is refused; with Automount the
// account's token volume is added unless the pod or its account opts out.
func (s *Server) admitServiceAccount(ctx context.Context, a *Attributes) error {
	if a.Verb != "create" || a.Subresource != "" || a.Kind.GVK.Kind != "Pod" {
		return nil
	}
	pod := a.Object.(*corev1.Pod)
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; mirror {
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = DefaultServiceAccount
	}
	pod.Spec.DeprecatedServiceAccount = pod.Spec.ServiceAccountName
	k, _ := schemas.ByResource("", "v1", "serviceaccounts")
	obj, err := s.readServiceAccount(ctx, k, a.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return apierrors.NewForbidden(groupResource(a.Kind), a.Name,
			fmt.Errorf("error looking up service account %s/%s: %w", a.Namespace, pod.Spec.ServiceAccountName, err))
	}
	if s.opts.ServiceAccountAdmission.Automount && shouldAutomount(obj.(*corev1.ServiceAccount), pod) {
		mountServiceAccountToken(pod)
	}
	return nil
}

// readServiceAccount reads the account from the view, and again at the latest revision when
// the view has none: it may have just been created through another replica. `default` is
// looked for a while longer, as kube's plugin does: the controller creates it just after the
// namespace, and a pod sent right after the namespace should not fail on that race.
func (s *Server) readServiceAccount(ctx context.Context, k *schemas.Kind, ns, name string) (runtime.Object, error) {
	obj, _, err := s.readWithRev(ctx, k, ns, name, false)
	attempts := 1
	if name == DefaultServiceAccount {
		attempts = defaultAccountAttempts
	}
	for i := 0; i < attempts && apierrors.IsNotFound(err); i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(100+rand.Intn(100)) * time.Millisecond):
			}
		}
		obj, _, err = s.readWithRev(ctx, k, ns, name, true)
	}
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("serviceaccount %q not found", name)
	}
	return obj, err
}

// shouldAutomount: the pod's setting wins, then the account's; default yes.
func shouldAutomount(sa *corev1.ServiceAccount, pod *corev1.Pod) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	if sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

// mountServiceAccountToken mounts the token volume in every container that has nothing at the
// mount path yet, and adds the volume if one of them needs it, exactly as kube's plugin does.
func mountServiceAccountToken(pod *corev1.Pod) {
	name, has := "", false
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, TokenVolumePrefix) {
			name, has = v.Name, true
			break
		}
	}
	if name == "" {
		name = TokenVolumePrefix + rand.String(5)
	}
	mount := corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: TokenMountPath}
	needed := false
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if !mountsAt(cs[i].VolumeMounts, TokenMountPath) {
				cs[i].VolumeMounts = append(cs[i].VolumeMounts, mount)
				needed = true
			}
		}
	}
	if needed && !has {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: tokenVolumeSource()}})
	}
}

func mountsAt(ms []corev1.VolumeMount, path string) bool {
	for _, m := range ms {
		if m.MountPath == path {
			return true
		}
	}
	return false
}

// tokenVolumeSource is kube's TokenVolumeSource: the token, the cluster CA and the namespace.
func tokenVolumeSource() *corev1.ProjectedVolumeSource {
	return &corev1.ProjectedVolumeSource{
		DefaultMode: ptrTo(int32(corev1.ProjectedVolumeSourceDefaultMode)),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptrTo(int64(tokenVolumeSeconds))}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}
}
