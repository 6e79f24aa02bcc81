package validation

import (
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The volume types and projection sources Skiff's kubelet makes real; any other is refused
// here, never accepted and then ignored by the node.
var (
	supportedVolumes     = []string{"configMap", "downwardAPI", "emptyDir", "hostPath", "persistentVolumeClaim", "projected", "secret"}
	supportedProjections = []string{"configMap", "downwardAPI", "secret", "serviceAccountToken"}
)

// volumeSource checks that the one set source of a volume is a supported type, and its
// fields as Kubernetes does (paths, modes, hostPath types, emptyDir media).
func volumeSource(s *corev1.VolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range setFields(*s) {
		if !contains(supportedVolumes, name) {
			errs = append(errs, field.NotSupported(p.Child(name), name, supportedVolumes))
		}
	}
	switch {
	case s.EmptyDir != nil:
		errs = append(errs, oneOf(s.EmptyDir.Medium, p.Child("emptyDir", "medium"), corev1.StorageMediumDefault, corev1.StorageMediumMemory)...)
		if l := s.EmptyDir.SizeLimit; l != nil && l.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("emptyDir", "sizeLimit"), l.String(), "must be greater than or equal to 0"))
		}
	case s.HostPath != nil:
		hp := p.Child("hostPath")
		if s.HostPath.Path == "" {
			errs = append(errs, field.Required(hp.Child("path"), ""))
		}
		if t := s.HostPath.Type; t != nil {
			errs = append(errs, oneOf(*t, hp.Child("type"), corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory,
				corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev)...)
		}
	case s.ConfigMap != nil:
		cp := p.Child("configMap")
		errs = append(errs, required(s.ConfigMap.Name, cp.Child("name"))...)
		errs = append(errs, fileMode(s.ConfigMap.DefaultMode, cp.Child("defaultMode"))...)
		errs = append(errs, keyToPaths(s.ConfigMap.Items, cp.Child("items"))...)
	case s.Secret != nil:
		sp := p.Child("secret")
		errs = append(errs, required(s.Secret.SecretName, sp.Child("secretName"))...)
		errs = append(errs, fileMode(s.Secret.DefaultMode, sp.Child("defaultMode"))...)
		errs = append(errs, keyToPaths(s.Secret.Items, sp.Child("items"))...)
	case s.DownwardAPI != nil:
		dp := p.Child("downwardAPI")
		errs = append(errs, fileMode(s.DownwardAPI.DefaultMode, dp.Child("defaultMode"))...)
		errs = append(errs, downwardItems(s.DownwardAPI.Items, dp.Child("items"))...)
	case s.Projected != nil:
		errs = append(errs, projected(s.Projected, p.Child("projected"))...)
	case s.PersistentVolumeClaim != nil:
		errs = append(errs, required(s.PersistentVolumeClaim.ClaimName, p.Child("persistentVolumeClaim", "claimName"))...)
	}
	return errs
}

func projected(s *corev1.ProjectedVolumeSource, p *field.Path) field.ErrorList {
	errs := fileMode(s.DefaultMode, p.Child("defaultMode"))
	for i, src := range s.Sources {
		sp := p.Child("sources").Index(i)
		set := setFields(src)
		if len(set) != 1 {
			errs = append(errs, field.Forbidden(sp, "must specify exactly 1 projection source"))
		}
		for _, name := range set {
			if !contains(supportedProjections, name) {
				errs = append(errs, field.NotSupported(sp.Child(name), name, supportedProjections))
			}
		}
		switch {
		case src.ConfigMap != nil:
			errs = append(errs, required(src.ConfigMap.Name, sp.Child("configMap", "name"))...)
			errs = append(errs, keyToPaths(src.ConfigMap.Items, sp.Child("configMap", "items"))...)
		case src.Secret != nil:
			errs = append(errs, required(src.Secret.Name, sp.Child("secret", "name"))...)
			errs = append(errs, keyToPaths(src.Secret.Items, sp.Child("secret", "items"))...)
		case src.DownwardAPI != nil:
			errs = append(errs, downwardItems(src.DownwardAPI.Items, sp.Child("downwardAPI", "items"))...)
		case src.ServiceAccountToken != nil:
			tp := sp.Child("serviceAccountToken")
			errs = append(errs, localPath(src.ServiceAccountToken.Path, tp.Child("path"))...)
			if e := src.ServiceAccountToken.ExpirationSeconds; e != nil && (*e < 600 || *e > 1<<32) {
				errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), *e, "may not be less than 10 minutes or longer than 4294967296 seconds (2^32)"))
			}
		}
	}
	return errs
}

func keyToPaths(items []corev1.KeyToPath, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, it := range items {
		ip := p.Index(i)
		errs = append(errs, required(it.Key, ip.Child("key"))...)
		errs = append(errs, localPath(it.Path, ip.Child("path"))...)
		errs = append(errs, fileMode(it.Mode, ip.Child("mode"))...)
	}
	return errs
}

func downwardItems(items []corev1.DownwardAPIVolumeFile, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, it := range items {
		ip := p.Index(i)
		errs = append(errs, localPath(it.Path, ip.Child("path"))...)
		errs = append(errs, fileMode(it.Mode, ip.Child("mode"))...)
		switch {
		case (it.FieldRef == nil) == (it.ResourceFieldRef == nil):
			errs = append(errs, field.Invalid(ip, "", "fieldRef and resourceFieldRef can not be specified simultaneously, and one is required"))
		case it.FieldRef != nil:
			errs = append(errs, downwardVolumeField(it.FieldRef.FieldPath, ip.Child("fieldRef", "fieldPath"))...)
		case it.ResourceFieldRef.ContainerName == "":
			errs = append(errs, field.Required(ip.Child("resourceFieldRef", "containerName"), ""))
		}
	}
	return errs
}

// downwardVolumeField accepts the field paths Kubernetes allows in downwardAPI volume files.
func downwardVolumeField(path string, p *field.Path) field.ErrorList {
	switch {
	case path == "metadata.name", path == "metadata.namespace", path == "metadata.uid",
		path == "metadata.labels", path == "metadata.annotations":
		return nil
	case strings.HasPrefix(path, "metadata.labels['") && strings.HasSuffix(path, "']"),
		strings.HasPrefix(path, "metadata.annotations['") && strings.HasSuffix(path, "']"):
		return nil
	}
	return field.ErrorList{field.NotSupported(p, path, []string{"metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid"})}
}

// localPath is a relative path that stays inside the volume (no '..' element, not '..'-led).
func localPath(v string, p *field.Path) field.ErrorList {
	switch {
	case v == "":
		return field.ErrorList{field.Required(p, "")}
	case strings.HasPrefix(v, "/"):
		return field.ErrorList{field.Invalid(p, v, "must be a relative path")}
	case strings.HasPrefix(v, ".."):
		return field.ErrorList{field.Invalid(p, v, "must not start with '..'")}
	}
	for _, e := range strings.Split(v, "/") {
		if e == ".." {
			return field.ErrorList{field.Invalid(p, v, "must not contain '..'")}
		}
	}
	return nil
}

func fileMode(m *int32, p *field.Path) field.ErrorList {
	if m != nil && (*m < 0 || *m > 0o777) {
		return field.ErrorList{field.Invalid(p, *m, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

func required(v string, p *field.Path) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	return nil
}

// volumeMount checks what Skiff's kubelet cannot honour and what Kubernetes forbids.
func volumeMount(m *corev1.VolumeMount, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.SubPath != "" && m.SubPathExpr != "" {
		errs = append(errs, field.Invalid(p.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
	}
	if m.SubPath != "" {
		errs = append(errs, localPath(m.SubPath, p.Child("subPath"))...)
	}
	if m.MountPropagation != nil {
		errs = append(errs, oneOf(*m.MountPropagation, p.Child("mountPropagation"), corev1.MountPropagationNone)...)
	}
	if m.RecursiveReadOnly != nil {
		errs = append(errs, oneOf(*m.RecursiveReadOnly, p.Child("recursiveReadOnly"), corev1.RecursiveReadOnlyDisabled)...)
	}
	return errs
}

// setFields names the set pointer fields of a one-of struct by their JSON names.
func setFields(oneOf any) []string {
	v := reflect.ValueOf(oneOf)
	var out []string
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			out = append(out, strings.Split(v.Type().Field(i).Tag.Get("json"), ",")[0])
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
