package validation

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// envFrom checks each source names exactly one ConfigMap or Secret and a valid prefix.
func envFrom(from []corev1.EnvFromSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, f := range from {
		fp := p.Index(i)
		if f.Prefix != "" {
			errs = append(errs, messages(fp.Child("prefix"), f.Prefix, validation.IsRelaxedEnvVarName(f.Prefix))...)
		}
		switch {
		case (f.ConfigMapRef == nil) == (f.SecretRef == nil):
			errs = append(errs, field.Invalid(fp, "", "must specify one of: `configMapRef` or `secretRef`"))
		case f.ConfigMapRef != nil:
			errs = append(errs, required(f.ConfigMapRef.Name, fp.Child("configMapRef", "name"))...)
		default:
			errs = append(errs, required(f.SecretRef.Name, fp.Child("secretRef", "name"))...)
		}
	}
	return errs
}

// envSource refuses the env sources Skiff's kubelet does not resolve.
func envSource(s *corev1.EnvVarSource, p *field.Path) field.ErrorList {
	if s != nil && s.FileKeyRef != nil {
		return field.ErrorList{field.NotSupported(p.Child("fileKeyRef"), "fileKeyRef", []string{"configMapKeyRef", "fieldRef", "resourceFieldRef", "secretKeyRef"})}
	}
	return nil
}
