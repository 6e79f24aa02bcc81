package validation_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/schemas/defaults"
	"github.com/skiff-sh/skiff/schemas/validation"
)

func ptr[T any](v T) *T { return &v }

func meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default"}
}

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27",
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}}}}
}

func deployment() *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: meta("web"), Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: podSpec()},
	}}
}

func service() *corev1.Service {
	return &corev1.Service{ObjectMeta: meta("web"), Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
		Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
}

// check defaults obj, validates it and wants an error at path whose text contains want
// (want "" means obj must be valid).
func check(t *testing.T, name string, obj runtime.Object, path, want string) {
	t.Helper()
	defaults.Default(obj)
	errs := validation.Validate(obj)
	if path == "" {
		if len(errs) > 0 {
			t.Errorf("%s: unexpected errors: %v", name, errs)
		}
		return
	}
	for _, e := range errs {
		if e.Field == path && strings.Contains(e.Error(), want) {
			return
		}
	}
	t.Errorf("%s: no error at %s containing %q; got %v", name, path, want, errs)
}

func TestValidObjectsPass(t *testing.T) {
	for name, obj := range map[string]runtime.Object{
		"pod":        &corev1.Pod{ObjectMeta: meta("web"), Spec: podSpec()},
		"deployment": deployment(),
		"replicaset": &appsv1.ReplicaSet{ObjectMeta: meta("rs"), Spec: appsv1.ReplicaSetSpec{Selector: deployment().Spec.Selector, Template: deployment().Spec.Template}},
		"daemonset":  &appsv1.DaemonSet{ObjectMeta: meta("ds"), Spec: appsv1.DaemonSetSpec{Selector: deployment().Spec.Selector, Template: deployment().Spec.Template}},
		"service":    service(),
		"headless":   &corev1.Service{ObjectMeta: meta("db"), Spec: corev1.ServiceSpec{ClusterIP: "None"}},
		"namespace":  &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		"node":       &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1.example"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}}},
		"event":      &corev1.Event{ObjectMeta: meta("web.1"), InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web"}, Type: "Warning"},
		"configmap":  &corev1.ConfigMap{ObjectMeta: meta("cm"), Data: map[string]string{"a.txt": "x", "B_2": "y"}},
		"secret":     &corev1.Secret{ObjectMeta: meta("s"), Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": nil, "tls.key": nil}},
		"slice":      &discoveryv1.EndpointSlice{ObjectMeta: meta("web-x"), AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}, Ports: []discoveryv1.EndpointPort{{Port: ptr(int32(80))}}},
		"lease":      &coordinationv1.Lease{ObjectMeta: meta("l"), Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("me"), LeaseDurationSeconds: ptr(int32(15))}},
	} {
		check(t, name, obj, "", "")
	}
}

func TestPodRules(t *testing.T) {
	type mut func(s *corev1.PodSpec)
	c0 := "spec.containers[0]"
	cases := []struct {
		name, path, want string
		mut              mut
	}{
		{"no containers", "spec.containers", "Required value", func(s *corev1.PodSpec) { s.Containers = nil }},
		{"no image", c0 + ".image", "Required value", func(s *corev1.PodSpec) { s.Containers[0].Image = "" }},
		{"image whitespace", c0 + ".image", "whitespace", func(s *corev1.PodSpec) { s.Containers[0].Image = " nginx" }},
		{"no name", c0 + ".name", "Required value", func(s *corev1.PodSpec) { s.Containers[0].Name = "" }},
		{"bad name", c0 + ".name", "RFC 1123 label", func(s *corev1.PodSpec) { s.Containers[0].Name = "Web" }},
		{"duplicate with init", "spec.containers[0].name", "Duplicate value", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "web", Image: "x"}}
		}},
		{"port 70000", c0 + ".ports[0].containerPort", "between 1 and 65535", func(s *corev1.PodSpec) { s.Containers[0].Ports[0].ContainerPort = 70000 }},
		{"host port", c0 + ".ports[0].hostPort", "between 1 and 65535", func(s *corev1.PodSpec) { s.Containers[0].Ports[0].HostPort = -1 }},
		{"protocol", c0 + ".ports[0].protocol", `Unsupported value: "ICMP"`, func(s *corev1.PodSpec) { s.Containers[0].Ports[0].Protocol = "ICMP" }},
		{"port name", c0 + ".ports[0].name", "must be no more than 15 characters", func(s *corev1.PodSpec) { s.Containers[0].Ports[0].Name = "a-very-long-port-name" }},
		{"restart policy", "spec.restartPolicy", "Unsupported value", func(s *corev1.PodSpec) { s.RestartPolicy = "Sometimes" }},
		{"dns policy", "spec.dnsPolicy", "Unsupported value", func(s *corev1.PodSpec) { s.DNSPolicy = "Magic" }},
		{"dns none needs servers", "spec.dnsConfig.nameservers", "Required value", func(s *corev1.PodSpec) { s.DNSPolicy, s.DNSConfig = corev1.DNSNone, &corev1.PodDNSConfig{} }},
		{"requests over limits", c0 + ".resources.requests[memory]", "must be less than or equal to memory limit of 1Gi", func(s *corev1.PodSpec) {
			s.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": resource.MustParse("2Gi")}, Limits: corev1.ResourceList{"memory": resource.MustParse("1Gi")}}
		}},
		{"negative request", c0 + ".resources.requests[cpu]", "greater than or equal to 0", func(s *corev1.PodSpec) {
			s.Containers[0].Resources.Requests = corev1.ResourceList{"cpu": resource.MustParse("-1")}
		}},
		{"unknown resource", c0 + ".resources.limits[gpus]", "Unsupported value", func(s *corev1.PodSpec) {
			s.Containers[0].Resources.Limits = corev1.ResourceList{"gpus": resource.MustParse("1")}
		}},
		{"probe without handler", c0 + ".readinessProbe", "must specify a handler type", func(s *corev1.PodSpec) { s.Containers[0].ReadinessProbe = &corev1.Probe{} }},
		{"probe two handlers", c0 + ".livenessProbe", "may not specify more than 1 handler type", func(s *corev1.PodSpec) {
			s.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}, TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
		}},
		{"liveness success threshold", c0 + ".livenessProbe.successThreshold", "must be 1", func(s *corev1.PodSpec) {
			s.Containers[0].LivenessProbe = &corev1.Probe{SuccessThreshold: 2, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}}
		}},
		{"probe port name", c0 + ".readinessProbe.httpGet.port", "must contain at least one letter", func(s *corev1.PodSpec) {
			s.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("8080")}}}
		}},
		{"mount unknown volume", c0 + ".volumeMounts[0].name", "Not found", func(s *corev1.PodSpec) {
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}},
		{"two volume sources", "spec.volumes[0]", "more than 1 volume type", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}, HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}},
		{"duplicate volume", "spec.volumes[1].name", "Duplicate value", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v"}, {Name: "v"}}
		}},
		{"env name", c0 + ".env[0].name", "Required value", func(s *corev1.PodSpec) { s.Containers[0].Env = []corev1.EnvVar{{Value: "x"}} }},
		{"toleration effect", "spec.tolerations[0].effect", "Unsupported value", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: "Never"}}
		}},
		{"toleration exists with value", "spec.tolerations[0].value", "must be empty", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}}
		}},
		{"node selector", "spec.nodeSelector", "Invalid value", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"bad key!": "x"} }},
		{"restartPolicy on an app container", c0 + ".restartPolicy", "may not be set for non-init containers", func(s *corev1.PodSpec) {
			s.Containers[0].RestartPolicy = ptr(corev1.ContainerRestartPolicyAlways)
		}},
		{"init restartPolicy", "spec.initContainers[0].restartPolicy", "Unsupported value", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", Image: "x", RestartPolicy: ptr(corev1.ContainerRestartPolicy("Never"))}}
		}},
		{"probe on an init container", "spec.initContainers[0].readinessProbe", "without restartPolicy=Always", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", Image: "x", ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}}
		}},
		{"postStart without handler", c0 + ".lifecycle.postStart", "must specify a handler type", func(s *corev1.PodSpec) {
			s.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{}}
		}},
		{"preStop exec without command", c0 + ".lifecycle.preStop.exec.command", "Required value", func(s *corev1.PodSpec) {
			s.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{}}}
		}},
		{"stopSignal", c0 + ".lifecycle.stopSignal", "not supported", func(s *corev1.PodSpec) {
			s.Containers[0].Lifecycle = &corev1.Lifecycle{StopSignal: ptr(corev1.SIGINT)}
		}},
		{"termination message from logs", c0 + ".terminationMessagePolicy", "Unsupported value", func(s *corev1.PodSpec) {
			s.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		}},
		{"deadline", "spec.activeDeadlineSeconds", "must be greater than 0", func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = ptr(int64(0)) }},
	}
	for _, c := range cases {
		p := &corev1.Pod{ObjectMeta: meta("web"), Spec: podSpec()}
		c.mut(&p.Spec)
		check(t, c.name, p, c.path, c.want)
	}
	sidecar := &corev1.Pod{ObjectMeta: meta("web"), Spec: podSpec()}
	sidecar.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "x"}, {Name: "proxy", Image: "x",
		RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways),
		StartupProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}}
	check(t, "init container and sidecar with a probe", sidecar, "", "")
	// The node runs them; kube validates none of the three, stdinOnce without stdin included.
	interactive := &corev1.Pod{ObjectMeta: meta("web"), Spec: podSpec()}
	interactive.Spec.Containers[0].Stdin, interactive.Spec.Containers[0].StdinOnce, interactive.Spec.Containers[0].TTY = true, true, true
	check(t, "stdin, stdinOnce and tty", interactive, "", "")
	onceOnly := &corev1.Pod{ObjectMeta: meta("web"), Spec: podSpec()}
	onceOnly.Spec.Containers[0].StdinOnce = true
	check(t, "stdinOnce without stdin", onceOnly, "", "")
	check(t, "pod name", &corev1.Pod{ObjectMeta: meta("Web"), Spec: podSpec()}, "metadata.name", "RFC 1123 subdomain")
	check(t, "pod namespace", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: podSpec()}, "metadata.namespace", "Required value")
}

func TestWorkloadRules(t *testing.T) {
	tmpl := "spec.template"
	cases := []struct {
		name, path, want string
		mut              func(d *appsv1.Deployment)
	}{
		{"negative replicas", "spec.replicas", "must be greater than or equal to 0", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(-1)) }},
		{"no selector", "spec.selector", "Required value", func(d *appsv1.Deployment) { d.Spec.Selector = nil }},
		{"empty selector", "spec.selector", "empty selector is invalid for deployment", func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} }},
		{"selector mismatch", tmpl + ".metadata.labels", "`selector` does not match template `labels`", func(d *appsv1.Deployment) {
			d.Spec.Template.Labels = map[string]string{"app": "other"}
		}},
		{"bad selector operator", "spec.selector.matchExpressions[0].operator", "not a valid selector operator", func(d *appsv1.Deployment) {
			d.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}
		}},
		{"template image", tmpl + ".spec.containers[0].image", "Required value", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "" }},
		{"template restart never", tmpl + ".spec.restartPolicy", `Unsupported value: "Never": supported values: "Always"`, func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		}},
		{"template deadline", tmpl + ".spec.activeDeadlineSeconds", "Forbidden", func(d *appsv1.Deployment) { d.Spec.Template.Spec.ActiveDeadlineSeconds = ptr(int64(5)) }},
		{"both zero", "spec.strategy.rollingUpdate.maxUnavailable", "may not be 0 when `maxSurge` is 0", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr(intstr.FromString("0%")), MaxUnavailable: ptr(intstr.FromInt32(0))}
		}},
		{"over 100%", "spec.strategy.rollingUpdate.maxUnavailable", "must not be greater than 100%", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr(intstr.FromString("150%"))}
		}},
		{"bad percent", "spec.strategy.rollingUpdate.maxSurge", "Invalid value", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr(intstr.FromString("lots"))}
		}},
		{"recreate with rolling", "spec.strategy.rollingUpdate", "Forbidden", func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{}}
		}},
		{"strategy type", "spec.strategy.type", "Unsupported value", func(d *appsv1.Deployment) { d.Spec.Strategy.Type = "BlueGreen" }},
		{"deadline under minReady", "spec.progressDeadlineSeconds", "must be greater than minReadySeconds", func(d *appsv1.Deployment) {
			d.Spec.MinReadySeconds = 30
			d.Spec.ProgressDeadlineSeconds = ptr(int32(10))
		}},
	}
	for _, c := range cases {
		d := deployment()
		c.mut(d)
		check(t, c.name, d, c.path, c.want)
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: meta("rs"), Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(-2)), Selector: deployment().Spec.Selector, Template: deployment().Spec.Template}}
	check(t, "rs replicas", rs, "spec.replicas", "greater than or equal to 0")
	ds := &appsv1.DaemonSet{ObjectMeta: meta("ds"), Spec: appsv1.DaemonSetSpec{Selector: deployment().Spec.Selector, Template: deployment().Spec.Template,
		UpdateStrategy: appsv1.DaemonSetUpdateStrategy{RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr(intstr.FromInt32(0))}}}}
	check(t, "ds both zero", ds, "spec.updateStrategy.rollingUpdate.maxUnavailable", "may not be 0")
}

func TestServiceRules(t *testing.T) {
	cases := []struct {
		name, path, want string
		mut              func(s *corev1.Service)
	}{
		{"name with dot", "metadata.name", "DNS-1035 label", func(s *corev1.Service) { s.Name = "web.v1" }},
		{"no ports", "spec.ports", "Required value", func(s *corev1.Service) { s.Spec.Ports = nil }},
		{"port 0", "spec.ports[0].port", "between 1 and 65535", func(s *corev1.Service) { s.Spec.Ports[0].Port = 0 }},
		{"target port", "spec.ports[0].targetPort", "between 1 and 65535", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(99999) }},
		{"second port unnamed", "spec.ports[1].name", "Required value", func(s *corev1.Service) { s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: 443}) }},
		{"duplicate name", "spec.ports[1].name", "Duplicate value", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "http", Port: 443})
		}},
		{"duplicate port+protocol", "spec.ports[1]", "Duplicate value", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "other", Port: 80})
		}},
		{"same port other protocol ok", "", "", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "udp", Port: 80, Protocol: corev1.ProtocolUDP})
		}},
		{"bad protocol", "spec.ports[0].protocol", "Unsupported value", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "QUIC" }},
		{"bad cluster ip", "spec.clusterIP", "must be a valid IP address", func(s *corev1.Service) { s.Spec.ClusterIP = "ten" }},
		{"clusterIPs mismatch", "spec.clusterIPs[0]", "must match `clusterIP`", func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.0.0.1", []string{"10.0.0.2"}
		}},
		{"headless nodeport", "spec.clusterIP", "may not be set to 'None'", func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.Type = "None", corev1.ServiceTypeNodePort
		}},
		{"nodePort on ClusterIP", "spec.ports[0].nodePort", "may not be used when `type` is 'ClusterIP'", func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30000 }},
		{"bad type", "spec.type", "Unsupported value", func(s *corev1.Service) { s.Spec.Type = "Magic" }},
		{"external name required", "spec.externalName", "Required value", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.Selector = corev1.ServiceTypeExternalName, nil
		}},
		{"external name with selector", "spec.selector", "may not be set for ExternalName services", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "db.example.com"
		}},
		{"affinity", "spec.sessionAffinity", "Unsupported value", func(s *corev1.Service) { s.Spec.SessionAffinity = "Sticky" }},
		{"etp on ClusterIP", "spec.externalTrafficPolicy", "externally-accessible", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = "Local" }},
		{"dual families single stack", "spec.ipFamilies", "at most one entry", func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
		}},
	}
	for _, c := range cases {
		s := service()
		c.mut(s)
		check(t, c.name, s, c.path, c.want)
	}
}

func TestOtherKindRules(t *testing.T) {
	slice := func(at discoveryv1.AddressType, addrs ...string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: meta("s"), AddressType: at, Endpoints: []discoveryv1.Endpoint{{Addresses: addrs}}}
	}
	big := strings.Repeat("x", 1<<20)
	cases := []struct {
		name string
		obj  runtime.Object
		path string
		want string
	}{
		{"slice type", slice("IPX", "1.2.3.4"), "addressType", "Unsupported value"},
		{"slice no addresses", slice(discoveryv1.AddressTypeIPv4), "endpoints[0].addresses", "Required value"},
		{"slice v6 in v4", slice(discoveryv1.AddressTypeIPv4, "fd00::1"), "endpoints[0].addresses[0]", "must be an IPv4 address"},
		{"slice v4 in v6", slice(discoveryv1.AddressTypeIPv6, "10.0.0.1"), "endpoints[0].addresses[0]", "must be an IPv6 address"},
		{"slice fqdn", slice(discoveryv1.AddressTypeFQDN, "Not_A_Name"), "endpoints[0].addresses[0]", "RFC 1123 subdomain"},
		{"slice port", &discoveryv1.EndpointSlice{ObjectMeta: meta("s"), AddressType: "IPv4", Ports: []discoveryv1.EndpointPort{{Port: ptr(int32(0))}}}, "ports[0].port", "between 1 and 65535"},
		{"slice dup port name", &discoveryv1.EndpointSlice{ObjectMeta: meta("s"), AddressType: "IPv4", Ports: []discoveryv1.EndpointPort{{Name: ptr("a")}, {Name: ptr("a")}}}, "ports[1].name", "Duplicate value"},
		{"lease duration", &coordinationv1.Lease{ObjectMeta: meta("l"), Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr(int32(-5))}}, "spec.leaseDurationSeconds", "must be greater than 0"},
		{"lease transitions", &coordinationv1.Lease{ObjectMeta: meta("l"), Spec: coordinationv1.LeaseSpec{LeaseTransitions: ptr(int32(-1))}}, "spec.leaseTransitions", "greater than or equal to 0"},
		{"lease preferred holder", &coordinationv1.Lease{ObjectMeta: meta("l"), Spec: coordinationv1.LeaseSpec{PreferredHolder: ptr("x")}}, "spec.preferredHolder", "Forbidden"},
		{"configmap key", &corev1.ConfigMap{ObjectMeta: meta("c"), Data: map[string]string{"a/b": ""}}, "data[a/b]", "a valid config key"},
		{"configmap dup key", &corev1.ConfigMap{ObjectMeta: meta("c"), Data: map[string]string{"k": ""}, BinaryData: map[string][]byte{"k": nil}}, "binaryData[k]", "duplicate"},
		{"configmap size", &corev1.ConfigMap{ObjectMeta: meta("c"), Data: map[string]string{"a": big, "b": "y"}}, "data", "Too long"},
		{"secret tls", &corev1.Secret{ObjectMeta: meta("s"), Type: corev1.SecretTypeTLS}, "data[tls.crt]", "Required value"},
		{"secret size", &corev1.Secret{ObjectMeta: meta("s"), Data: map[string][]byte{"a": []byte(big + "x")}}, "data", "Too long"},
		{"namespace name", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a.b"}}, "metadata.name", "must not contain dots"},
		{"namespace finalizer", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"not a name"}}}, "spec.finalizers[0]", "Invalid value"},
		{"node taint effect", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k"}}}}, "spec.taints[0].effect", "Required value"},
		{"node taint key", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "bad key", Effect: "NoSchedule"}}}}, "spec.taints[0].key", "Invalid value"},
		{"node dup taint", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: "NoSchedule"}, {Key: "k", Value: "v", Effect: "NoSchedule"}}}}, "spec.taints[1]", "Duplicate value"},
		{"node cidr", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0"}}, "spec.podCIDR", "Invalid value"},
		{"node namespaced", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "default"}}, "metadata.namespace", "Forbidden"},
		{"event object kind", &corev1.Event{ObjectMeta: meta("e"), InvolvedObject: corev1.ObjectReference{Name: "x"}}, "involvedObject.kind", "Required value"},
		{"event namespace", &corev1.Event{ObjectMeta: meta("e"), InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "x", Namespace: "other"}}, "involvedObject.namespace", "does not match event.namespace"},
		{"event type", &corev1.Event{ObjectMeta: meta("e"), InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "x"}, Type: "Bad"}, "type", "Unsupported value"},
	}
	for _, c := range cases {
		check(t, c.name, c.obj, c.path, c.want)
	}
	if errs := validation.Validate(&corev1.PodList{}); len(errs) != 1 || errs[0].Type != field.ErrorTypeInternal {
		t.Errorf("unknown type: %v", errs)
	}
}

// update validates oldObj (defaulted) then a changed copy and wants an error at path.
func update[T runtime.Object](t *testing.T, name string, old T, change func(T), path, want string) {
	t.Helper()
	checkUpdate(t, validation.ValidateUpdate, name, old, change, path, want)
}

// checkUpdate is update with the given validation of the change (a whole update's, a status
// write's).
func checkUpdate[T runtime.Object](t *testing.T, validate func(n, o runtime.Object) field.ErrorList, name string, old T, change func(T), path, want string) {
	t.Helper()
	defaults.Default(old)
	m, err := apimeta.Accessor(old)
	if err != nil {
		t.Fatal(err)
	}
	m.SetResourceVersion("7") // the apiserver validates updates with the revision being replaced
	next := old.DeepCopyObject().(T)
	change(next)
	before := old.DeepCopyObject()
	errs := validate(next, old)
	if !apiequality.Semantic.DeepEqual(before, old) {
		t.Errorf("%s: validating the update changed the stored object", name)
	}
	if path == "" {
		if len(errs) > 0 {
			t.Errorf("%s: unexpected errors %v", name, errs)
		}
		return
	}
	for _, e := range errs {
		if e.Field == path && strings.Contains(e.Error(), want) {
			return
		}
	}
	t.Errorf("%s: no error at %s containing %q; got %v", name, path, want, errs)
}

func TestUpdates(t *testing.T) {
	d := deployment()
	d.UID = types.UID("u1")
	update(t, "deployment selector", d, func(d *appsv1.Deployment) {
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "v": "2"}}
		d.Spec.Template.Labels["v"] = "2"
	}, "spec.selector", "field is immutable")
	update(t, "deployment scale and image", deployment(), func(d *appsv1.Deployment) {
		d.Spec.Replicas = ptr(int32(5))
		d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	}, "", "")
	update(t, "name", deployment(), func(d *appsv1.Deployment) { d.Name = "other" }, "metadata.name", "field is immutable")
	update(t, "namespace", deployment(), func(d *appsv1.Deployment) { d.Namespace = "other" }, "metadata.namespace", "field is immutable")
	update(t, "uid", d, func(d *appsv1.Deployment) { d.UID = "u2" }, "metadata.uid", "field is immutable")

	pod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: meta("p"), Spec: podSpec()}
	}
	update(t, "pod image", pod(), func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:2" }, "", "")
	update(t, "pod labels", pod(), func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"} }, "", "")
	update(t, "pod add toleration", pod(), func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists})
	}, "", "")
	update(t, "pod drop toleration", pod(), func(p *corev1.Pod) { p.Spec.Tolerations = p.Spec.Tolerations[1:] }, "spec.tolerations[0]", "Forbidden")
	update(t, "pod deadline set", pod(), func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(60)) }, "spec.activeDeadlineSeconds", "not supported by Skiff's kubelet")
	withDeadline := pod()
	withDeadline.Spec.ActiveDeadlineSeconds = ptr(int64(60))
	update(t, "pod deadline longer", withDeadline, func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(61)) }, "spec.activeDeadlineSeconds", "less than or equal to previous value")
	update(t, "pod ports", pod(), func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 81 }, "spec", "pod updates may not change fields")
	update(t, "pod bind", pod(), func(p *corev1.Pod) { p.Spec.NodeName = "n1" }, "", "")
	bound := pod()
	bound.Spec.NodeName = "n1"
	update(t, "pod rebind", bound, func(p *corev1.Pod) { p.Spec.NodeName = "n2" }, "spec.nodeName", "immutable")
	update(t, "pod status", bound, func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning; p.Status.PodIP = "10.0.0.9" }, "", "")

	svc := service()
	svc.Spec.ClusterIP = "10.96.0.10"
	update(t, "service ip", svc, func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.11", []string{"10.96.0.11"} }, "spec.clusterIP", "immutable")
	update(t, "service ports", svc, func(s *corev1.Service) { s.Spec.Ports[0].Port = 8080 }, "", "")
	update(t, "service to external name", svc, func(s *corev1.Service) {
		s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "x.example.com", SessionAffinity: "None"}
	}, "", "")

	es := &discoveryv1.EndpointSlice{ObjectMeta: meta("s"), AddressType: discoveryv1.AddressTypeIPv4}
	update(t, "slice address type", es, func(s *discoveryv1.EndpointSlice) { s.AddressType = discoveryv1.AddressTypeIPv6 }, "addressType", "immutable")
	cm := &corev1.ConfigMap{ObjectMeta: meta("c"), Data: map[string]string{"a": "1"}, Immutable: ptr(true)}
	update(t, "immutable configmap", cm, func(c *corev1.ConfigMap) { c.Data["a"] = "2" }, "data", "immutable")
	sec := &corev1.Secret{ObjectMeta: meta("s"), Data: map[string][]byte{"a": []byte("1")}, Immutable: ptr(true)}
	update(t, "immutable secret", sec, func(s *corev1.Secret) { s.Data["a"] = []byte("2") }, "data", "immutable")
	update(t, "secret type", &corev1.Secret{ObjectMeta: meta("s")}, func(s *corev1.Secret) {
		s.Type = corev1.SecretTypeBasicAuth
		s.Data = map[string][]byte{"username": nil}
	}, "type", "immutable")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24"}}
	update(t, "node cidr", node, func(n *corev1.Node) { n.Spec.PodCIDR = "10.244.1.0/24" }, "spec.podCIDR", "Forbidden")

	if errs := validation.ValidateUpdate(deployment(), service()); len(errs) == 0 {
		t.Error("updating a Service into a Deployment passed")
	}
}
