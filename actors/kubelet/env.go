package kubelet

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/kubelet/downward"
)

// envList is a container's environment being built: a later value of a name replaces the
// earlier one in its place.
type envList struct {
	names []string
	vals  map[string]string
}

func (l *envList) set(name, v string) {
	if _, ok := l.vals[name]; !ok {
		l.names = append(l.names, name)
	}
	l.vals[name] = v
}

func (l *envList) list() []string {
	out := make([]string, len(l.names))
	for i, n := range l.names {
		out[i] = n + "=" + l.vals[n]
	}
	return out
}

// containerEnv resolves a container's environment as Kubernetes' kubelet does: envFrom
// sources first (prefixed; keys that are not valid names skipped with an event), then env in
// order ($(VAR) references to earlier variables and Service variables expanded; fieldRef,
// resourceFieldRef, configMapKeyRef, secretKeyRef), then the Service variables not set
// otherwise. ConfigMaps and Secrets are read through the API, which gives a node only those
// its pods reference. It returns the environment and the variables for $(VAR) in command,
// args and subPathExpr.
func (k *kubelet) containerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIP string) ([]string, map[string]string, error) {
	env := &envList{vals: map[string]string{}}
	for i := range c.EnvFrom {
		if err := k.envFrom(ctx, pod, &c.EnvFrom[i], env); err != nil {
			return nil, nil, err
		}
	}
	svc := k.serviceEnv(pod)
	lookup := map[string]string{}
	for n, v := range svc.vals {
		lookup[n] = v
	}
	for n, v := range env.vals {
		lookup[n] = v
	}
	n := downward.Node{PodIP: podIP, HostIP: k.cfg.NodeIP, Allocatable: k.allocatable()}
	for _, e := range c.Env {
		v, found, err := k.envValue(ctx, pod, c, &e, lookup, n)
		if err != nil {
			return nil, nil, err
		}
		if found {
			env.set(e.Name, v)
			lookup[e.Name] = v
		}
	}
	for _, name := range svc.names {
		if _, ok := env.vals[name]; !ok {
			env.set(name, svc.vals[name])
		}
	}
	return env.list(), lookup, nil
}

func (k *kubelet) envValue(ctx context.Context, pod *corev1.Pod, c *corev1.Container, e *corev1.EnvVar, lookup map[string]string, n downward.Node) (string, bool, error) {
	src := e.ValueFrom
	switch {
	case src == nil:
		return expand(e.Value, lookup), true, nil
	case src.FieldRef != nil:
		v, err := downward.FieldValue(pod, src.FieldRef.FieldPath, n)
		if err != nil {
			return "", false, fmt.Errorf("env %s: %w", e.Name, err)
		}
		return v, true, nil
	case src.ResourceFieldRef != nil:
		v, err := downward.ResourceValue(pod, c.Name, src.ResourceFieldRef, n)
		if err != nil {
			return "", false, fmt.Errorf("env %s: %w", e.Name, err)
		}
		return v, true, nil
	case src.ConfigMapKeyRef != nil || src.SecretKeyRef != nil:
		return k.refKey(ctx, pod.Namespace, e.Name, src)
	}
	return "", false, fmt.Errorf("env %s: only fieldRef, resourceFieldRef, configMapKeyRef and secretKeyRef are supported", e.Name)
}

// envFrom adds every key of a ConfigMap or Secret (prefixed); a missing optional source adds
// nothing, keys that are not valid variable names are skipped with an event.
func (k *kubelet) envFrom(ctx context.Context, pod *corev1.Pod, f *corev1.EnvFromSource, env *envList) error {
	var data map[string]string
	what, name := "configMap", ""
	var err error
	switch {
	case f.ConfigMapRef != nil:
		name = f.ConfigMapRef.Name
		data, err = k.objectData(ctx, "configmaps", pod.Namespace, name, f.ConfigMapRef.Optional)
	case f.SecretRef != nil:
		what, name = "secret", f.SecretRef.Name
		data, err = k.objectData(ctx, "secrets", pod.Namespace, name, f.SecretRef.Optional)
	default:
		return fmt.Errorf("envFrom: only configMapRef and secretRef are supported")
	}
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(data))
	for key := range data {
		keys = append(keys, key)
	}
	sort.Strings(keys) // a stable environment, whatever the map order
	var invalid []string
	for _, key := range keys {
		if len(validation.IsRelaxedEnvVarName(f.Prefix+key)) != 0 {
			invalid = append(invalid, f.Prefix+key)
			continue
		}
		env.set(f.Prefix+key, data[key])
	}
	if len(invalid) > 0 {
		k.recorder.Eventf(ctx, pod, corev1.EventTypeWarning, "InvalidEnvironmentVariableNames",
			"Keys [%s] from the EnvFrom %s %s/%s were skipped since they are considered invalid environment variable names.",
			strings.Join(invalid, ", "), what, pod.Namespace, name)
	}
	return nil
}

// objectData reads a ConfigMap's or Secret's data as strings; a missing optional one is empty.
func (k *kubelet) objectData(ctx context.Context, resource, ns, name string, optional *bool) (map[string]string, error) {
	o, err := k.getObject(ctx, resource, ns, name)
	if err != nil {
		if optional != nil && *optional && apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	out := map[string]string{}
	switch o := o.(type) {
	case *corev1.ConfigMap:
		for key, v := range o.Data {
			out[key] = v
		}
		for key, v := range o.BinaryData {
			out[key] = string(v)
		}
	case *corev1.Secret:
		for key, v := range o.Data {
			out[key] = string(v)
		}
	}
	return out, nil
}

// getObject reads a ConfigMap or Secret as the node; not found is worded as Kubernetes'
// kubelet words it (configmap "x" not found), which users see as the waiting message.
// Within one sync (withObjectCache) each object is read once, however many env entries and
// volumes name it.
func (k *kubelet) getObject(ctx context.Context, resource, ns, name string) (any, error) {
	cache, _ := ctx.Value(objectCacheKey{}).(map[string]objectRead)
	key := resource + "/" + ns + "/" + name
	if r, ok := cache[key]; ok {
		return r.obj, r.err
	}
	var obj any
	o, err := k.client.Get(ctx, controllerkit.MustKind("", resource), ns, name)
	switch {
	case apierrors.IsNotFound(err):
		err = apierrors.NewNotFound(schema.GroupResource{Resource: strings.TrimSuffix(resource, "s")}, name)
	case err == nil:
		obj = o
	}
	if cache != nil {
		cache[key] = objectRead{obj, err}
	}
	return obj, err
}

type objectCacheKey struct{}

type objectRead struct {
	obj any
	err error
}

// withObjectCache scopes getObject's reads to one sync (its goroutine only).
func withObjectCache(ctx context.Context) context.Context {
	return context.WithValue(ctx, objectCacheKey{}, map[string]objectRead{})
}

// refKey reads the key a configMapKeyRef or secretKeyRef names; a missing optional one is not
// found, a missing required one an error.
func (k *kubelet) refKey(ctx context.Context, ns, envName string, src *corev1.EnvVarSource) (string, bool, error) {
	resource, kind, name, key, optional := "configmaps", "ConfigMap", "", "", false
	if r := src.ConfigMapKeyRef; r != nil {
		name, key, optional = r.Name, r.Key, r.Optional != nil && *r.Optional
	} else {
		r := src.SecretKeyRef
		resource, kind, name, key, optional = "secrets", "Secret", r.Name, r.Key, r.Optional != nil && *r.Optional
	}
	data, err := k.objectData(ctx, resource, ns, name, &optional)
	switch {
	case apierrors.IsNotFound(err):
		return "", false, err
	case err != nil:
		return "", false, fmt.Errorf("env %s: %w", envName, err)
	}
	v, ok := data[key]
	if !ok && !optional {
		return "", false, fmt.Errorf("couldn't find key %s in %s %s/%s", key, kind, ns, name)
	}
	return v, ok, nil
}

// allocatable is this node's allocatable resources (what an unset limit reads as).
func (k *kubelet) allocatable() corev1.ResourceList {
	if k.nodes == nil {
		return nil
	}
	if o, ok := k.nodes.Get("", k.cfg.NodeName); ok {
		return o.(*corev1.Node).Status.Allocatable
	}
	return nil
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
