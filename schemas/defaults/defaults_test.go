package defaults_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-sh/skiff/schemas/defaults"
)

func ptr[T any](v T) *T { return &v }

func TestPullPolicy(t *testing.T) {
	cases := map[string]corev1.PullPolicy{
		"nginx": corev1.PullAlways, "nginx:latest": corev1.PullAlways, "nginx:1.27": corev1.PullIfNotPresent,
		"registry:5000/app": corev1.PullAlways, "registry:5000/app:v1": corev1.PullIfNotPresent,
		"app@sha256:abc": corev1.PullIfNotPresent, "a/b/c:latest": corev1.PullAlways,
	}
	for image, want := range cases {
		if got := defaults.PullPolicyFor(image); got != want {
			t.Errorf("%s: %s; want %s", image, got, want)
		}
	}
}

func TestPod(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Image: "nginx:1.27",
		Ports:          []corev1.ContainerPort{{ContainerPort: 80}},
		LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
		ReadinessProbe: &corev1.Probe{PeriodSeconds: 5, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}},
		Resources:      corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
		Env:            []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
	}}, Volumes: []corev1.Volume{{Name: "scratch"}, {Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}}}}}
	defaults.Default(p)
	s := p.Spec
	c := s.Containers[0]
	checks := []struct {
		name string
		ok   bool
	}{
		{"restartPolicy Always", s.RestartPolicy == corev1.RestartPolicyAlways},
		{"dnsPolicy ClusterFirst", s.DNSPolicy == corev1.DNSClusterFirst},
		{"schedulerName", s.SchedulerName == "default-scheduler"},
		{"grace 30", *s.TerminationGracePeriodSeconds == 30},
		{"securityContext {}", s.SecurityContext != nil && apiequality.Semantic.DeepEqual(*s.SecurityContext, corev1.PodSecurityContext{})},
		{"enableServiceLinks", *s.EnableServiceLinks},
		{"serviceAccountName", s.ServiceAccountName == "default" && s.DeprecatedServiceAccount == "default"},
		{"priority 0", *s.Priority == 0},
		{"two default tolerations", len(s.Tolerations) == 2 && *s.Tolerations[0].TolerationSeconds == 300 && s.Tolerations[1].Key == corev1.TaintNodeUnreachable},
		{"imagePullPolicy", c.ImagePullPolicy == corev1.PullIfNotPresent},
		{"termination message", c.TerminationMessagePath == "/dev/termination-log" && c.TerminationMessagePolicy == corev1.TerminationMessageReadFile},
		{"port TCP", c.Ports[0].Protocol == corev1.ProtocolTCP && c.Ports[0].HostPort == 0},
		{"liveness defaults", *c.LivenessProbe == corev1.Probe{ProbeHandler: c.LivenessProbe.ProbeHandler, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}},
		{"http scheme and path", c.LivenessProbe.HTTPGet.Scheme == corev1.URISchemeHTTP && c.LivenessProbe.HTTPGet.Path == "/"},
		{"readiness keeps period", c.ReadinessProbe.PeriodSeconds == 5 && c.ReadinessProbe.TimeoutSeconds == 1},
		{"requests from limits", c.Resources.Requests.Cpu().Cmp(resource.MustParse("1")) == 0},
		{"fieldRef apiVersion", c.Env[0].ValueFrom.FieldRef.APIVersion == "v1"},
		{"volume without source is emptyDir", s.Volumes[0].EmptyDir != nil},
		{"configMap mode 0644", *s.Volumes[1].ConfigMap.DefaultMode == 0o644},
		{"phase Pending", p.Status.Phase == corev1.PodPending},
		{"QoS Burstable", p.Status.QOSClass == corev1.PodQOSBurstable},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: not defaulted", c.name)
		}
	}
	again := p.DeepCopy()
	defaults.Default(again)
	if !apiequality.Semantic.DeepEqual(p, again) {
		t.Error("defaulting twice changed the pod")
	}
}

func TestPodKeepsUserValues(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, DNSPolicy: corev1.DNSDefault, SchedulerName: "mine",
		TerminationGracePeriodSeconds: ptr(int64(5)), EnableServiceLinks: ptr(false), HostNetwork: true,
		Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		Containers:  []corev1.Container{{Name: "c", Image: "x", ImagePullPolicy: corev1.PullNever, Ports: []corev1.ContainerPort{{ContainerPort: 53, Protocol: corev1.ProtocolUDP}}}},
	}}
	defaults.Default(p)
	s := p.Spec
	if s.RestartPolicy != corev1.RestartPolicyNever || s.DNSPolicy != corev1.DNSDefault || s.SchedulerName != "mine" ||
		*s.TerminationGracePeriodSeconds != 5 || *s.EnableServiceLinks || s.Containers[0].ImagePullPolicy != corev1.PullNever ||
		s.Containers[0].Ports[0].Protocol != corev1.ProtocolUDP {
		t.Errorf("overrode user values: %+v", s)
	}
	if s.Containers[0].Ports[0].HostPort != 53 {
		t.Error("host network: hostPort not defaulted to containerPort")
	}
	if len(s.Tolerations) != 1 {
		t.Errorf("a tolerate-everything toleration got %d tolerations", len(s.Tolerations))
	}
	if p.Status.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("QoS %s", p.Status.QOSClass)
	}
}

func TestQOSClass(t *testing.T) {
	rl := func(cpu, mem string) corev1.ResourceList {
		l := corev1.ResourceList{}
		if cpu != "" {
			l[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	cases := []struct {
		req, lim corev1.ResourceList
		want     corev1.PodQOSClass
	}{
		{nil, nil, corev1.PodQOSBestEffort},
		{rl("1", "1Gi"), rl("1", "1Gi"), corev1.PodQOSGuaranteed},
		{rl("1000m", "1024Mi"), rl("1", "1Gi"), corev1.PodQOSGuaranteed},
		{rl("500m", "1Gi"), rl("1", "1Gi"), corev1.PodQOSBurstable},
		{rl("1", ""), nil, corev1.PodQOSBurstable},
		{nil, rl("1", ""), corev1.PodQOSBurstable},
	}
	for i, c := range cases {
		s := corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: c.req, Limits: c.lim}}}}
		if got := defaults.QOSClass(&s); got != c.want {
			t.Errorf("case %d: %s; want %s", i, got, c.want)
		}
	}
}

func TestWorkloads(t *testing.T) {
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}}
	defaults.Default(d)
	ru := d.Spec.Strategy.RollingUpdate
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType ||
		ru.MaxSurge.String() != "25%" || ru.MaxUnavailable.String() != "25%" || *d.Spec.RevisionHistoryLimit != 10 ||
		*d.Spec.ProgressDeadlineSeconds != 600 {
		t.Errorf("deployment: %+v", d.Spec)
	}
	ts := d.Spec.Template.Spec
	if ts.RestartPolicy != corev1.RestartPolicyAlways || ts.Containers[0].ImagePullPolicy != corev1.PullAlways {
		t.Errorf("template not defaulted: %+v", ts)
	}
	if ts.EnableServiceLinks != nil || len(ts.Tolerations) != 0 || ts.ServiceAccountName != "" {
		t.Error("template got Pod-only defaults")
	}

	recreate := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}}}
	defaults.Default(recreate)
	if recreate.Spec.Strategy.RollingUpdate != nil {
		t.Error("Recreate got rollingUpdate")
	}

	rs := &appsv1.ReplicaSet{}
	defaults.Default(rs)
	if *rs.Spec.Replicas != 1 || rs.Spec.Template.Spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("replicaset: %+v", rs.Spec)
	}

	ds := &appsv1.DaemonSet{}
	defaults.Default(ds)
	dru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || dru.MaxUnavailable.IntValue() != 1 ||
		dru.MaxSurge.IntValue() != 0 || *ds.Spec.RevisionHistoryLimit != 10 {
		t.Errorf("daemonset: %+v", ds.Spec)
	}
}

func TestService(t *testing.T) {
	cases := []struct {
		name string
		in   corev1.ServiceSpec
		want corev1.ServiceSpec
	}{
		{"cluster ip", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}, {Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")}}},
			corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityNone,
				Ports:                 []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}, {Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")}},
				InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyCluster), IPFamilyPolicy: ptr(corev1.IPFamilyPolicySingleStack),
				IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}},
		{"headless v6 affinity", corev1.ServiceSpec{ClusterIP: "fd00::10", SessionAffinity: corev1.ServiceAffinityClientIP},
			corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "fd00::10", ClusterIPs: []string{"fd00::10"},
				SessionAffinity:       corev1.ServiceAffinityClientIP,
				SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(10800))}},
				InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyCluster), IPFamilyPolicy: ptr(corev1.IPFamilyPolicySingleStack),
				IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol}}},
		{"load balancer", corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
			corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, SessionAffinity: corev1.ServiceAffinityNone,
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster, AllocateLoadBalancerNodePorts: ptr(true),
				InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyCluster), IPFamilyPolicy: ptr(corev1.IPFamilyPolicySingleStack),
				IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}},
		{"external name", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"},
			corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com", SessionAffinity: corev1.ServiceAffinityNone}},
	}
	for _, c := range cases {
		s := &corev1.Service{Spec: c.in}
		defaults.Default(s)
		if !apiequality.Semantic.DeepEqual(s.Spec, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, s.Spec, c.want)
		}
	}
}

func TestOthers(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	sec := &corev1.Secret{Data: map[string][]byte{"a": []byte("1"), "b": []byte("2")}, StringData: map[string]string{"b": "3"}}
	es := &discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Port: ptr(int32(80))}}}
	for _, o := range []runtime.Object{ns, sec, es, &corev1.ConfigMap{}, &corev1.Event{}, &corev1.Node{}} {
		defaults.Default(o)
	}
	if ns.Status.Phase != corev1.NamespaceActive || ns.Labels[corev1.LabelMetadataName] != "shop" || len(ns.Spec.Finalizers) != 0 {
		t.Errorf("namespace: %+v", ns)
	}
	if sec.Type != corev1.SecretTypeOpaque || string(sec.Data["b"]) != "3" || string(sec.Data["a"]) != "1" || sec.StringData != nil {
		t.Errorf("secret: %+v", sec)
	}
	if *es.Ports[0].Protocol != corev1.ProtocolTCP || *es.Ports[0].Name != "" {
		t.Errorf("endpointslice: %+v", es.Ports)
	}
}

func TestUpdateCarriesAllocatedValues(t *testing.T) {
	old := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.5",
		Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}}}
	defaults.Default(old)
	next := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}, {Port: 81, Name: "b"}}}}
	defaults.Update(next, old)
	if next.Spec.ClusterIP != "10.96.0.5" || next.Spec.ClusterIPs[0] != "10.96.0.5" || next.Spec.Ports[0].NodePort != 30080 || next.Spec.Ports[1].NodePort != 0 {
		t.Errorf("%+v", next.Spec)
	}
	toExt := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "x.example.com"}}
	defaults.Update(toExt, old)
	if toExt.Spec.ClusterIP != "" {
		t.Error("ExternalName got a cluster IP")
	}
}
