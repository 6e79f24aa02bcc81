package defaults

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Pod defaults a Pod: its spec as in any template, plus what only a live Pod gets (service
// links, requests copied from limits, host ports under host networking, the default service
// account and the not-ready/unreachable tolerations the admission chain adds, status phase Pending
// and QoS class).
func Pod(p *corev1.Pod) {
	PodSpec(&p.Spec)
	if p.Spec.EnableServiceLinks == nil {
		p.Spec.EnableServiceLinks = ptr(true)
	}
	forEachContainer(&p.Spec, func(c *corev1.Container) { requestsFromLimits(&c.Resources) })
	if p.Spec.HostNetwork {
		forEachContainer(&p.Spec, func(c *corev1.Container) {
			for i := range c.Ports {
				if c.Ports[i].HostPort == 0 {
					c.Ports[i].HostPort = c.Ports[i].ContainerPort
				}
			}
		})
	}
	if p.Spec.ServiceAccountName == "" {
		p.Spec.ServiceAccountName = p.Spec.DeprecatedServiceAccount
	}
	if p.Spec.ServiceAccountName == "" {
		p.Spec.ServiceAccountName = "default"
	}
	if p.Spec.DeprecatedServiceAccount == "" {
		p.Spec.DeprecatedServiceAccount = p.Spec.ServiceAccountName
	}
	if p.Spec.Priority == nil && p.Spec.PriorityClassName == "" {
		p.Spec.Priority = ptr(int32(0))
	}
	addDefaultTolerations(&p.Spec)
	if p.Status.Phase == "" {
		p.Status.Phase = corev1.PodPending
	}
	if p.Status.QOSClass == "" {
		p.Status.QOSClass = QOSClass(&p.Spec)
	}
}

// defaultTolerationSeconds is how long a Pod stays bound to a not-ready or unreachable node.
const defaultTolerationSeconds = 300

func addDefaultTolerations(spec *corev1.PodSpec) {
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		if toleratesNoExecute(spec.Tolerations, key) {
			continue
		}
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
			Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
			TolerationSeconds: ptr(int64(defaultTolerationSeconds)),
		})
	}
}

func toleratesNoExecute(ts []corev1.Toleration, key string) bool {
	for _, t := range ts {
		if (t.Key == key || (t.Key == "" && t.Operator == corev1.TolerationOpExists)) &&
			(t.Effect == corev1.TaintEffectNoExecute || t.Effect == "") {
			return true
		}
	}
	return false
}

// PodSpec defaults a Pod spec as the apiserver does for Pods and for the templates of workloads.
func PodSpec(s *corev1.PodSpec) {
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr(int64(corev1.DefaultTerminationGracePeriodSeconds))
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
	forEachContainer(s, Container)
	for i := range s.EphemeralContainers {
		ec := &s.EphemeralContainers[i].EphemeralContainerCommon
		c := corev1.Container(*ec)
		Container(&c)
		*ec = corev1.EphemeralContainerCommon(c)
	}
	for i := range s.Volumes {
		Volume(&s.Volumes[i])
	}
}

func forEachContainer(s *corev1.PodSpec, f func(*corev1.Container)) {
	for i := range s.InitContainers {
		f(&s.InitContainers[i])
	}
	for i := range s.Containers {
		f(&s.Containers[i])
	}
}

// Container defaults one container.
func Container(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = PullPolicyFor(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		Probe(p)
	}
	if c.Lifecycle != nil {
		for _, h := range []*corev1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil {
				httpGet(h.HTTPGet)
			}
		}
	}
}

// PullPolicyFor is Always for an untagged or ":latest" image and IfNotPresent otherwise (an image
// pinned by digest counts as tagged).
func PullPolicyFor(image string) corev1.PullPolicy {
	if strings.Contains(image, "@") {
		return corev1.PullIfNotPresent
	}
	name := image[strings.LastIndex(image, "/")+1:]
	_, tag, tagged := strings.Cut(name, ":")
	if !tagged || tag == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// Probe defaults the timing and the HTTP scheme/path of a probe; nil is left nil.
func Probe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	httpGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = ptr("")
	}
}

func httpGet(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

// Volume defaults file modes of projected sources and makes a volume with no source an emptyDir.
func Volume(v *corev1.Volume) {
	src := &v.VolumeSource
	if *src == (corev1.VolumeSource{}) {
		src.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	mode := int32(corev1.SecretVolumeSourceDefaultMode)
	switch {
	case src.Secret != nil && src.Secret.DefaultMode == nil:
		src.Secret.DefaultMode = ptr(mode)
	case src.ConfigMap != nil && src.ConfigMap.DefaultMode == nil:
		src.ConfigMap.DefaultMode = ptr(mode)
	case src.DownwardAPI != nil && src.DownwardAPI.DefaultMode == nil:
		src.DownwardAPI.DefaultMode = ptr(mode)
	case src.Projected != nil && src.Projected.DefaultMode == nil:
		src.Projected.DefaultMode = ptr(mode)
	case src.HostPath != nil && src.HostPath.Type == nil:
		src.HostPath.Type = ptr(corev1.HostPathUnset)
	}
	if src.DownwardAPI != nil {
		for i := range src.DownwardAPI.Items {
			if fr := src.DownwardAPI.Items[i].FieldRef; fr != nil && fr.APIVersion == "" {
				fr.APIVersion = "v1"
			}
		}
	}
}

func requestsFromLimits(r *corev1.ResourceRequirements) {
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; ok {
			continue
		}
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[name] = q.DeepCopy()
	}
}

// QOSClass classifies a Pod spec: Guaranteed when every container has equal cpu and memory
// requests and limits, BestEffort when none has any, Burstable otherwise.
func QOSClass(s *corev1.PodSpec) corev1.PodQOSClass {
	any, guaranteed := false, true
	forEachContainer(s, func(c *corev1.Container) {
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[res]
			lim, hasLim := c.Resources.Limits[res]
			if hasReq || hasLim {
				any = true
			}
			if !hasLim || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	})
	switch {
	case !any:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// targetPortOrPort returns the Service target port, the port number when unset.
func targetPortOrPort(tp intstr.IntOrString, port int32) intstr.IntOrString {
	if tp.Type == intstr.String && tp.StrVal == "" || tp.Type == intstr.Int && tp.IntVal == 0 {
		return intstr.FromInt32(port)
	}
	return tp
}
