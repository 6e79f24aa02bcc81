package validation

import (
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Pod validates a Pod.
func Pod(p *corev1.Pod) field.ErrorList {
	errs := objectMeta(&p.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	return append(errs, PodSpec(&p.Spec, field.NewPath("spec"))...)
}

// PodSpec validates a Pod spec at path p (spec, or spec.template.spec in a workload).
func PodSpec(s *corev1.PodSpec, p *field.Path) field.ErrorList {
	volumes, errs := podVolumes(s.Volumes, p.Child("volumes"))
	if len(s.Containers) == 0 {
		errs = append(errs, field.Required(p.Child("containers"), ""))
	}
	names := sets.New[string]()
	for i := range s.InitContainers {
		errs = append(errs, container(&s.InitContainers[i], p.Child("initContainers").Index(i), names, volumes)...)
		errs = append(errs, initContainer(&s.InitContainers[i], p.Child("initContainers").Index(i))...)
	}
	for i := range s.Containers {
		errs = append(errs, container(&s.Containers[i], p.Child("containers").Index(i), names, volumes)...)
		if s.Containers[i].RestartPolicy != nil {
			errs = append(errs, field.Forbidden(p.Child("containers").Index(i).Child("restartPolicy"), "may not be set for non-init containers"))
		}
	}
	errs = append(errs, oneOf(s.RestartPolicy, p.Child("restartPolicy"),
		corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)...)
	errs = append(errs, podDNS(s, p)...)
	if s.TerminationGracePeriodSeconds != nil {
		errs = append(errs, nonNegative(*s.TerminationGracePeriodSeconds, p.Child("terminationGracePeriodSeconds"))...)
	}
	if s.ActiveDeadlineSeconds != nil {
		errs = append(errs, positive(*s.ActiveDeadlineSeconds, p.Child("activeDeadlineSeconds"))...)
	}
	if s.NodeName != "" {
		errs = append(errs, dnsSubdomain(s.NodeName, p.Child("nodeName"))...)
	}
	if s.ServiceAccountName != "" {
		errs = append(errs, dnsSubdomain(s.ServiceAccountName, p.Child("serviceAccountName"))...)
	}
	if s.Hostname != "" {
		errs = append(errs, dnsLabel(s.Hostname, p.Child("hostname"))...)
	}
	if s.Subdomain != "" {
		errs = append(errs, dnsLabel(s.Subdomain, p.Child("subdomain"))...)
	}
	errs = append(errs, labelMap(s.NodeSelector, p.Child("nodeSelector"))...)
	for i, t := range s.Tolerations {
		errs = append(errs, toleration(t, p.Child("tolerations").Index(i))...)
	}
	errs = append(errs, hostAliases(s.HostAliases, p.Child("hostAliases"))...)
	return append(errs, unsupportedPodSpec(s, p)...)
}

// podVolumes checks names (unique DNS labels) and that each volume has exactly one source, and
// returns the set of names for volume mounts to refer to.
func podVolumes(vs []corev1.Volume, p *field.Path) (sets.Set[string], field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, v := range vs {
		vp := p.Index(i)
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(vp.Child("name"), ""))
		case names.Has(v.Name):
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		default:
			errs = append(errs, dnsLabel(v.Name, vp.Child("name"))...)
		}
		names.Insert(v.Name)
		switch n := countSet(v.VolumeSource); {
		case n == 0:
			errs = append(errs, field.Required(vp, "must specify a volume type"))
		case n > 1:
			errs = append(errs, field.Forbidden(vp, "may not specify more than 1 volume type"))
		default:
			errs = append(errs, volumeSource(&v.VolumeSource, vp)...)
		}
	}
	return names, errs
}

// countSet counts the non-nil pointer fields of a one-of struct (volume sources, probe
// handlers).
func countSet(oneOf any) int {
	v := reflect.ValueOf(oneOf)
	n := 0
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}

func container(c *corev1.Container, p *field.Path, names, volumes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	switch {
	case c.Name == "":
		errs = append(errs, field.Required(p.Child("name"), ""))
	case names.Has(c.Name):
		errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
	default:
		errs = append(errs, dnsLabel(c.Name, p.Child("name"))...)
	}
	names.Insert(c.Name)
	switch {
	case c.Image == "":
		errs = append(errs, field.Required(p.Child("image"), ""))
	case strings.TrimSpace(c.Image) != c.Image:
		errs = append(errs, field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	errs = append(errs, oneOf(c.ImagePullPolicy, p.Child("imagePullPolicy"), corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever)...)
	// The node reads no termination message yet: a policy that asks for the log's tail is
	// refused rather than ignored.
	errs = append(errs, oneOf(c.TerminationMessagePolicy, p.Child("terminationMessagePolicy"), corev1.TerminationMessageReadFile)...)
	errs = append(errs, containerPorts(c.Ports, p.Child("ports"))...)
	errs = append(errs, env(c.Env, p.Child("env"))...)
	errs = append(errs, envFrom(c.EnvFrom, p.Child("envFrom"))...)
	errs = append(errs, resources(&c.Resources, p.Child("resources"))...)
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(mp.Child("name"), ""))
		} else if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(mp.Child("mountPath"), ""))
		}
		errs = append(errs, volumeMount(&m, mp)...)
	}
	errs = append(errs, probe(c.LivenessProbe, p.Child("livenessProbe"), true)...)
	errs = append(errs, probe(c.ReadinessProbe, p.Child("readinessProbe"), false)...)
	errs = append(errs, probe(c.StartupProbe, p.Child("startupProbe"), true)...)
	if l := c.Lifecycle; l != nil {
		errs = append(errs, lifecycleHandler(l.PostStart, p.Child("lifecycle", "postStart"))...)
		errs = append(errs, lifecycleHandler(l.PreStop, p.Child("lifecycle", "preStop"))...)
		// Accepting what the node does not do would run containers without it.
		if l.StopSignal != nil {
			errs = append(errs, field.Forbidden(p.Child("lifecycle", "stopSignal"), "stop signals are not supported by Skiff's kubelet yet"))
		}
	}
	if len(c.VolumeDevices) > 0 {
		errs = append(errs, field.Forbidden(p.Child("volumeDevices"), "block volumes are "+notByKubelet))
	}
	if len(c.RestartPolicyRules) > 0 {
		errs = append(errs, field.Forbidden(p.Child("restartPolicyRules"), notByKubelet))
	}
	return append(errs, containerSecurity(c.SecurityContext, p.Child("securityContext"))...)
}

// lifecycleHandler checks a hook has exactly one handler, each as a probe's.
func lifecycleHandler(h *corev1.LifecycleHandler, p *field.Path) field.ErrorList {
	if h == nil {
		return nil
	}
	var errs field.ErrorList
	switch n := countSet(*h); {
	case n == 0:
		errs = append(errs, field.Required(p, "must specify a handler type"))
	case n > 1:
		errs = append(errs, field.Forbidden(p, "may not specify more than 1 handler type"))
	}
	if h.HTTPGet != nil {
		errs = append(errs, portNumOrName(h.HTTPGet.Port, p.Child("httpGet", "port"))...)
	}
	if h.Exec != nil && len(h.Exec.Command) == 0 {
		errs = append(errs, field.Required(p.Child("exec", "command"), ""))
	}
	return errs
}

// initContainer checks what only an init container may have, as Kubernetes: restartPolicy
// Always (a sidecar), and only then probes and lifecycle hooks.
func initContainer(c *corev1.Container, p *field.Path) field.ErrorList {
	if c.RestartPolicy != nil {
		return oneOf(*c.RestartPolicy, p.Child("restartPolicy"), corev1.ContainerRestartPolicyAlways)
	}
	var errs field.ErrorList
	const msg = "may not be set for init containers without restartPolicy=Always"
	for _, f := range []struct {
		name string
		set  bool
	}{{"lifecycle", c.Lifecycle != nil}, {"livenessProbe", c.LivenessProbe != nil},
		{"readinessProbe", c.ReadinessProbe != nil}, {"startupProbe", c.StartupProbe != nil}} {
		if f.set {
			errs = append(errs, field.Forbidden(p.Child(f.name), msg))
		}
	}
	return errs
}

func containerPorts(ports []corev1.ContainerPort, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		pp := p.Index(i)
		if port.Name != "" {
			errs = append(errs, messages(pp.Child("name"), port.Name, validation.IsValidPortName(port.Name))...)
			if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			names.Insert(port.Name)
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(pp.Child("containerPort"), ""))
		} else {
			errs = append(errs, messages(pp.Child("containerPort"), port.ContainerPort, validation.IsValidPortNum(int(port.ContainerPort)))...)
		}
		if port.HostPort != 0 {
			errs = append(errs, messages(pp.Child("hostPort"), port.HostPort, validation.IsValidPortNum(int(port.HostPort)))...)
		}
		errs = append(errs, protocol(port.Protocol, pp.Child("protocol"))...)
	}
	return errs
}

func protocol(v corev1.Protocol, p *field.Path) field.ErrorList {
	return oneOf(v, p, corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP)
}

func env(vars []corev1.EnvVar, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, e := range vars {
		ep := p.Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(ep.Child("name"), ""))
		} else {
			errs = append(errs, messages(ep.Child("name"), e.Name, validation.IsRelaxedEnvVarName(e.Name))...)
		}
		if e.Value != "" && e.ValueFrom != nil {
			errs = append(errs, field.Invalid(ep.Child("valueFrom"), "", "may not be specified when `value` is not empty"))
		}
		errs = append(errs, envSource(e.ValueFrom, ep.Child("valueFrom"))...)
		if e.ValueFrom != nil && countSet(*e.ValueFrom) != 1 {
			errs = append(errs, field.Invalid(ep.Child("valueFrom"), "", "must specify exactly one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or `fileKeyRef`"))
		}
	}
	return errs
}

// resources checks quantities are non-negative and that no request exceeds its limit.
func resources(r *corev1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(l corev1.ResourceList, lp *field.Path) {
		for name, q := range l {
			np := lp.Key(string(name))
			errs = append(errs, resourceName(name, np)...)
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(np, q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	check(r.Limits, p.Child("limits"))
	check(r.Requests, p.Child("requests"))
	for name, req := range r.Requests {
		lim, ok := r.Limits[name]
		if ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		}
	}
	return errs
}

// resourceName accepts the standard resources, hugepages and extended (domain-qualified) ones.
func resourceName(name corev1.ResourceName, p *field.Path) field.ErrorList {
	n := string(name)
	switch {
	case name == corev1.ResourceCPU, name == corev1.ResourceMemory, name == corev1.ResourceEphemeralStorage:
		return nil
	case strings.HasPrefix(n, corev1.ResourceHugePagesPrefix):
		if _, err := resource.ParseQuantity(strings.TrimPrefix(n, corev1.ResourceHugePagesPrefix)); err != nil {
			return field.ErrorList{field.Invalid(p, n, "must have a page size quantity, e.g. hugepages-2Mi")}
		}
		return nil
	case strings.Contains(n, "/"):
		return validation.IsFullyQualifiedName(p, strings.SplitN(n, "/", 2)[0])
	}
	return field.ErrorList{field.NotSupported(p, n, []string{"cpu", "memory", "ephemeral-storage", "hugepages-<size>", "<domain>/<name>"})}
}

// probe checks a probe has exactly one handler and sane timings; liveness and startup probes
// must need a single success.
func probe(pr *corev1.Probe, p *field.Path, singleSuccess bool) field.ErrorList {
	if pr == nil {
		return nil
	}
	var errs field.ErrorList
	switch n := countSet(pr.ProbeHandler); {
	case n == 0:
		errs = append(errs, field.Required(p, "must specify a handler type"))
	case n > 1:
		errs = append(errs, field.Forbidden(p, "may not specify more than 1 handler type"))
	}
	h := pr.ProbeHandler
	if h.HTTPGet != nil {
		errs = append(errs, portNumOrName(h.HTTPGet.Port, p.Child("httpGet", "port"))...)
		errs = append(errs, oneOf(h.HTTPGet.Scheme, p.Child("httpGet", "scheme"), corev1.URISchemeHTTP, corev1.URISchemeHTTPS)...)
	}
	if h.TCPSocket != nil {
		errs = append(errs, portNumOrName(h.TCPSocket.Port, p.Child("tcpSocket", "port"))...)
	}
	if h.Exec != nil && len(h.Exec.Command) == 0 {
		errs = append(errs, field.Required(p.Child("exec", "command"), ""))
	}
	if h.GRPC != nil {
		errs = append(errs, messages(p.Child("grpc", "port"), h.GRPC.Port, validation.IsValidPortNum(int(h.GRPC.Port)))...)
	}
	errs = append(errs, nonNegative(int64(pr.InitialDelaySeconds), p.Child("initialDelaySeconds"))...)
	errs = append(errs, positive(int64(pr.TimeoutSeconds), p.Child("timeoutSeconds"))...)
	errs = append(errs, positive(int64(pr.PeriodSeconds), p.Child("periodSeconds"))...)
	errs = append(errs, positive(int64(pr.SuccessThreshold), p.Child("successThreshold"))...)
	errs = append(errs, positive(int64(pr.FailureThreshold), p.Child("failureThreshold"))...)
	if singleSuccess && pr.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(p.Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
	}
	return errs
}

func toleration(t corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, labelKey(t.Key, p.Child("key"))...)
	}
	switch t.Operator {
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, "value must be empty when `operator` is 'Exists'"))
		}
	case corev1.TolerationOpEqual, "":
		if t.Key == "" {
			errs = append(errs, field.Invalid(p.Child("operator"), t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
	}
	if t.Effect != "" {
		errs = append(errs, oneOf(t.Effect, p.Child("effect"), corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute)...)
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(p.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
	}
	return errs
}
