package volumes

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/actors/kubelet/downward"
)

// keyed is the data of a ConfigMap or Secret as files, by key.
type keyed map[string][]byte

// project turns keyed data into files: every key, or only items (path and mode each); a key
// items name that is missing fails unless optional, as Kubernetes' kubelet does.
func project(data keyed, items []corev1.KeyToPath, def os.FileMode, optional bool, what string) (map[string]File, error) {
	out := map[string]File{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = File{Data: v, Mode: def}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%s references non-existent %s key: %s", what, keyWord(what), it.Key)
		}
		m := def
		if it.Mode != nil {
			m = mode(it.Mode)
		}
		out[it.Path] = File{Data: v, Mode: m}
	}
	return out, nil
}

func keyWord(what string) string {
	if what == "configmap" {
		return "config"
	}
	return "secret"
}

func (m *Manager) configMapData(ctx context.Context, ns, name string, optional bool) (keyed, error) {
	cm, err := m.Objects.ConfigMap(ctx, ns, name)
	if err != nil {
		if optional && apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	data := keyed{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return data, nil
}

func (m *Manager) secretData(ctx context.Context, ns, name string, optional bool) (keyed, error) {
	s, err := m.Objects.Secret(ctx, ns, name)
	if err != nil {
		if optional && apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return keyed(s.Data), nil
}

// keyedFiles projects a ConfigMap's or Secret's (what) keys; a missing optional one is empty.
func (m *Manager) keyedFiles(ctx context.Context, ns, what, name string, opt *bool, items []corev1.KeyToPath, def os.FileMode) (map[string]File, error) {
	optional := opt != nil && *opt
	read := m.configMapData
	if what == "secret" {
		read = m.secretData
	}
	data, err := read(ctx, ns, name, optional)
	if err != nil {
		return nil, err
	}
	return project(data, items, def, optional, what)
}

// downwardFiles resolves each item's fieldRef or resourceFieldRef (whose containerName is
// required in a volume).
func downwardFiles(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, def os.FileMode, n downward.Node) (map[string]File, error) {
	out := map[string]File{}
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = downward.FieldValue(pod, it.FieldRef.FieldPath, n)
		case it.ResourceFieldRef != nil:
			v, err = downward.ResourceValue(pod, "", it.ResourceFieldRef, n)
		default:
			err = fmt.Errorf("downwardAPI item %q: needs fieldRef or resourceFieldRef", it.Path)
		}
		if err != nil {
			return nil, err
		}
		m := def
		if it.Mode != nil {
			m = mode(it.Mode)
		}
		out[it.Path] = File{Data: []byte(v), Mode: m}
	}
	return out, nil
}

// projectedFiles merges the sources into one payload; a later source's path wins.
func (m *Manager) projectedFiles(ctx context.Context, pod *corev1.Pod, p *corev1.ProjectedVolumeSource, n downward.Node) (map[string]File, error) {
	def := mode(p.DefaultMode)
	out := map[string]File{}
	for i, s := range p.Sources {
		files, err := m.projectedSource(ctx, pod, &s, def, n)
		if err != nil {
			return nil, fmt.Errorf("sources[%d]: %w", i, err)
		}
		for k, v := range files {
			out[k] = v
		}
	}
	return out, nil
}

func (m *Manager) projectedSource(ctx context.Context, pod *corev1.Pod, s *corev1.VolumeProjection, def os.FileMode, n downward.Node) (map[string]File, error) {
	switch {
	case s.ConfigMap != nil:
		return m.keyedFiles(ctx, pod.Namespace, "configmap", s.ConfigMap.Name, s.ConfigMap.Optional, s.ConfigMap.Items, def)
	case s.Secret != nil:
		return m.keyedFiles(ctx, pod.Namespace, "secret", s.Secret.Name, s.Secret.Optional, s.Secret.Items, def)
	case s.DownwardAPI != nil:
		return downwardFiles(pod, s.DownwardAPI.Items, def, n)
	case s.ServiceAccountToken != nil:
		if m.Token == nil {
			return nil, fmt.Errorf("serviceAccountToken projections are not supported by this node yet")
		}
		tok, err := m.Token(ctx, pod, s.ServiceAccountToken)
		if err != nil {
			return nil, err
		}
		return map[string]File{s.ServiceAccountToken.Path: {Data: tok, Mode: def}}, nil
	}
	return nil, fmt.Errorf("projection type not supported by this node")
}
