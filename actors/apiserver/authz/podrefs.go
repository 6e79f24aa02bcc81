package authz

import corev1 "k8s.io/api/core/v1"

// podSecretNames and podConfigMapNames list every Secret and ConfigMap a pod's spec can name,
// the references Kubernetes' node authorizer draws its graph from: image pull secrets, env
// and envFrom of every container (init and ephemeral too), and volumes (direct, projected
// and the volume plugins' secret references).
func podSecretNames(p *corev1.Pod) []string {
	var out []string
	add := func(name string) {
		if name != "" {
			out = append(out, name)
		}
	}
	for _, s := range p.Spec.ImagePullSecrets {
		add(s.Name)
	}
	visitEnv(p, func(e *corev1.EnvVarSource, f *corev1.EnvFromSource) {
		if e != nil && e.SecretKeyRef != nil {
			add(e.SecretKeyRef.Name)
		}
		if f != nil && f.SecretRef != nil {
			add(f.SecretRef.Name)
		}
	})
	for _, v := range p.Spec.Volumes {
		vs := v.VolumeSource
		if vs.Secret != nil {
			add(vs.Secret.SecretName)
		}
		if vs.Projected != nil {
			for _, src := range vs.Projected.Sources {
				if src.Secret != nil {
					add(src.Secret.Name)
				}
			}
		}
		for _, ref := range pluginSecretRefs(vs) {
			if ref != nil {
				add(ref.Name)
			}
		}
	}
	return out
}

func podConfigMapNames(p *corev1.Pod) []string {
	var out []string
	add := func(name string) {
		if name != "" {
			out = append(out, name)
		}
	}
	visitEnv(p, func(e *corev1.EnvVarSource, f *corev1.EnvFromSource) {
		if e != nil && e.ConfigMapKeyRef != nil {
			add(e.ConfigMapKeyRef.Name)
		}
		if f != nil && f.ConfigMapRef != nil {
			add(f.ConfigMapRef.Name)
		}
	})
	for _, v := range p.Spec.Volumes {
		if v.ConfigMap != nil {
			add(v.ConfigMap.Name)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					add(src.ConfigMap.Name)
				}
			}
		}
	}
	return out
}

// visitEnv calls f with each env valueFrom and envFrom source of every container.
func visitEnv(p *corev1.Pod, f func(*corev1.EnvVarSource, *corev1.EnvFromSource)) {
	visit := func(env []corev1.EnvVar, from []corev1.EnvFromSource) {
		for i := range env {
			if env[i].ValueFrom != nil {
				f(env[i].ValueFrom, nil)
			}
		}
		for i := range from {
			f(nil, &from[i])
		}
	}
	for _, c := range p.Spec.InitContainers {
		visit(c.Env, c.EnvFrom)
	}
	for _, c := range p.Spec.Containers {
		visit(c.Env, c.EnvFrom)
	}
	for _, c := range p.Spec.EphemeralContainers {
		visit(c.Env, c.EnvFrom)
	}
}

// pluginSecretRefs are the secret references of the volume plugins that take one.
func pluginSecretRefs(vs corev1.VolumeSource) []*corev1.LocalObjectReference {
	var refs []*corev1.LocalObjectReference
	switch {
	case vs.CSI != nil:
		refs = append(refs, vs.CSI.NodePublishSecretRef)
	case vs.FlexVolume != nil:
		refs = append(refs, vs.FlexVolume.SecretRef)
	case vs.ISCSI != nil:
		refs = append(refs, vs.ISCSI.SecretRef)
	case vs.RBD != nil:
		refs = append(refs, vs.RBD.SecretRef)
	case vs.CephFS != nil:
		refs = append(refs, vs.CephFS.SecretRef)
	case vs.Cinder != nil:
		refs = append(refs, vs.Cinder.SecretRef)
	case vs.ScaleIO != nil:
		refs = append(refs, vs.ScaleIO.SecretRef)
	case vs.StorageOS != nil:
		refs = append(refs, vs.StorageOS.SecretRef)
	case vs.AzureFile != nil:
		refs = append(refs, &corev1.LocalObjectReference{Name: vs.AzureFile.SecretName})
	}
	return refs
}

// podClaimNames are the PersistentVolumeClaims the pod's volumes name.
func podClaimNames(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if c := v.PersistentVolumeClaim; c != nil && c.ClaimName != "" {
			out = append(out, c.ClaimName)
		}
	}
	return out
}
