package kubelet

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// containerEnv resolves a container's environment in order: literal values (with $(VAR)
// references to earlier variables), fieldRefs on the pod, and ConfigMap and Secret keys. Both
// are read through the API, which gives a node only those its pods reference.
func (k *kubelet) containerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIP string) ([]string, map[string]string, error) {
	vals := map[string]string{}
	var out []string
	set := func(name, v string) {
		vals[name] = v
		out = append(out, name+"="+v)
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vals))
			continue
		}
		switch {
		case e.ValueFrom.FieldRef != nil:
			v, err := fieldValue(pod, e.ValueFrom.FieldRef.FieldPath, podIP, k.cfg.NodeIP)
			if err != nil {
				return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			set(e.Name, v)
		case e.ValueFrom.ConfigMapKeyRef != nil || e.ValueFrom.SecretKeyRef != nil:
			v, found, err := k.refKey(ctx, pod.Namespace, e.ValueFrom)
			if err != nil {
				return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			if found {
				set(e.Name, v)
			}
		default:
			return nil, nil, fmt.Errorf("env %s: only fieldRef, configMapKeyRef and secretKeyRef are supported", e.Name)
		}
	}
	return out, vals, nil
}

// refKey reads the key a configMapKeyRef or secretKeyRef names; a missing optional one is not
// found, a missing required one an error.
func (k *kubelet) refKey(ctx context.Context, ns string, src *corev1.EnvVarSource) (string, bool, error) {
	resource, name, key, optional := "configmaps", "", "", false
	if r := src.ConfigMapKeyRef; r != nil {
		name, key, optional = r.Name, r.Key, r.Optional != nil && *r.Optional
	} else {
		r := src.SecretKeyRef
		resource, name, key, optional = "secrets", r.Name, r.Key, r.Optional != nil && *r.Optional
	}
	o, err := k.client.Get(ctx, controllerkit.MustKind("", resource), ns, name)
	if err != nil {
		if optional && apierrors.IsNotFound(err) {
			return "", false, nil
		}
		return "", false, err
	}
	var v string
	var ok bool
	switch o := o.(type) {
	case *corev1.ConfigMap:
		v, ok = o.Data[key]
	case *corev1.Secret:
		var b []byte
		b, ok = o.Data[key]
		v = string(b)
	}
	if !ok && !optional {
		return "", false, fmt.Errorf("%s %s has no key %q", strings.TrimSuffix(resource, "s"), name, key)
	}
	return v, ok, nil
}

func fieldValue(pod *corev1.Pod, path, podIP, hostIP string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return podIP, nil
	case "status.hostIP":
		return hostIP, nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if rest, ok := strings.CutPrefix(path, prefix+"['"); ok && strings.HasSuffix(rest, "']") {
			return m[strings.TrimSuffix(rest, "']")], nil
		}
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

// expand replaces $(NAME) with a known variable's value and $$ with $; an unknown
// reference stays as written, as Kubernetes does.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func expandAll(list []string, vars map[string]string) []string {
	if list == nil {
		return nil
	}
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = expand(s, vars)
	}
	return out
}
