package validation

import (
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxDataSize bounds a ConfigMap's or Secret's payload, as in Kubernetes (1 MiB).
const maxDataSize = 1 << 20

// maxReasonLength bounds Event reasons.
const maxReasonLength = 128

// Namespace validates a Namespace.
func Namespace(ns *corev1.Namespace) field.ErrorList {
	errs := objectMeta(&ns.ObjectMeta, false, apivalidation.NameIsDNSLabel)
	for i, f := range ns.Spec.Finalizers {
		errs = append(errs, apivalidation.ValidateFinalizerName(string(f), field.NewPath("spec", "finalizers").Index(i))...)
	}
	if ns.Status.Phase != "" {
		errs = append(errs, oneOf(ns.Status.Phase, field.NewPath("status", "phase"), corev1.NamespaceActive, corev1.NamespaceTerminating)...)
	}
	return errs
}

// Node validates a Node: taints need a qualified key, a known effect, and no duplicate key+effect.
func Node(n *corev1.Node) field.ErrorList {
	errs := objectMeta(&n.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	type taintKey struct {
		key    string
		effect corev1.TaintEffect
	}
	seen := sets.New[taintKey]()
	for i, t := range n.Spec.Taints {
		tp := specPath.Child("taints").Index(i)
		errs = append(errs, labelKey(t.Key, tp.Child("key"))...)
		if t.Value != "" {
			errs = append(errs, messages(tp.Child("value"), t.Value, validation.IsValidLabelValue(t.Value))...)
		}
		errs = append(errs, oneOf(t.Effect, tp.Child("effect"), corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute)...)
		k := taintKey{t.Key, t.Effect}
		if seen.Has(k) {
			errs = append(errs, field.Duplicate(tp, "taints must be unique by key and effect pair"))
		}
		seen.Insert(k)
	}
	if n.Spec.PodCIDR != "" {
		errs = append(errs, validation.IsValidCIDR(specPath.Child("podCIDR"), n.Spec.PodCIDR)...)
	}
	for i, c := range n.Spec.PodCIDRs {
		errs = append(errs, validation.IsValidCIDR(specPath.Child("podCIDRs").Index(i), c)...)
	}
	return errs
}

// Event validates a core/v1 Event: it must say what it is about, in its own namespace.
func Event(e *corev1.Event) field.ErrorList {
	errs := objectMeta(&e.ObjectMeta, true, pathSegmentName)
	io := field.NewPath("involvedObject")
	if e.InvolvedObject.Kind == "" {
		errs = append(errs, field.Required(io.Child("kind"), ""))
	}
	if e.InvolvedObject.Name == "" {
		errs = append(errs, field.Required(io.Child("name"), ""))
	}
	if ns := e.InvolvedObject.Namespace; ns != "" && ns != e.Namespace {
		errs = append(errs, field.Invalid(io.Child("namespace"), ns, "does not match event.namespace"))
	}
	if e.Type != "" {
		errs = append(errs, oneOf(e.Type, field.NewPath("type"), corev1.EventTypeNormal, corev1.EventTypeWarning)...)
	}
	if len(e.Reason) > maxReasonLength {
		errs = append(errs, field.TooLong(field.NewPath("reason"), "", maxReasonLength))
	}
	if e.Count < 0 {
		errs = append(errs, nonNegative(int64(e.Count), field.NewPath("count"))...)
	}
	return errs
}

// ConfigMap validates a ConfigMap: key names, no key in both maps, at most 1 MiB in total.
func ConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	errs := objectMeta(&cm.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	size := 0
	for k, v := range cm.Data {
		errs = append(errs, messages(field.NewPath("data").Key(k), k, validation.IsConfigMapKey(k))...)
		size += len(v)
	}
	for k, v := range cm.BinaryData {
		bp := field.NewPath("binaryData").Key(k)
		errs = append(errs, messages(bp, k, validation.IsConfigMapKey(k))...)
		if _, dup := cm.Data[k]; dup {
			errs = append(errs, field.Invalid(bp, k, "duplicate of key present in data"))
		}
		size += len(v)
	}
	if size > maxDataSize {
		errs = append(errs, field.TooLong(field.NewPath("data"), "", maxDataSize))
	}
	return errs
}

// Secret validates a Secret: key names, size, and the keys its type requires.
func Secret(s *corev1.Secret) field.ErrorList {
	errs := objectMeta(&s.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	dp := field.NewPath("data")
	size := 0
	for k, v := range s.Data {
		errs = append(errs, messages(dp.Key(k), k, validation.IsConfigMapKey(k))...)
		size += len(v)
	}
	if size > maxDataSize {
		errs = append(errs, field.TooLong(dp, "", maxDataSize))
	}
	require := func(keys ...string) {
		for _, k := range keys {
			if _, ok := s.Data[k]; !ok {
				errs = append(errs, field.Required(dp.Key(k), ""))
			}
		}
	}
	switch s.Type {
	case corev1.SecretTypeTLS:
		require(corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	case corev1.SecretTypeDockerConfigJson:
		require(corev1.DockerConfigJsonKey)
	case corev1.SecretTypeDockercfg:
		require(corev1.DockerConfigKey)
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(metadataPath.Child("annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeBasicAuth:
		_, user := s.Data[corev1.BasicAuthUsernameKey]
		_, pass := s.Data[corev1.BasicAuthPasswordKey]
		if !user && !pass {
			errs = append(errs, field.Required(dp.Key(corev1.BasicAuthUsernameKey), ""))
		}
	case corev1.SecretTypeSSHAuth:
		require(corev1.SSHAuthPrivateKey)
	}
	return errs
}

// ServiceAccount validates a ServiceAccount: as in Kubernetes, its metadata with a DNS-subdomain
// name (the name becomes part of the user name system:serviceaccount:<ns>:<name>).
func ServiceAccount(sa *corev1.ServiceAccount) field.ErrorList {
	return objectMeta(&sa.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
}
