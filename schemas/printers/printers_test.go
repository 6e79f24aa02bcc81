package printers_test

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas/defaults"
	"github.com/skiff-sh/skiff/schemas/printers"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func ptr[T any](v T) *T { return &v }

func TestHumanDuration(t *testing.T) {
	cases := map[time.Duration]string{
		5 * time.Second: "5s", 3*time.Minute + 2*time.Second: "3m2s", 15 * time.Minute: "15m",
		4 * time.Hour: "4h", 5*time.Hour + 30*time.Minute: "5h30m", 30 * time.Hour: "30h",
		12 * 24 * time.Hour: "12d", 3*24*time.Hour + 4*time.Hour: "3d4h", -time.Second / 2: "0s",
	}
	for d, want := range cases {
		if got := printers.HumanDuration(d); got != want {
			t.Errorf("%v: %q; want %q", d, got, want)
		}
	}
	if got := printers.Age(metav1.Time{}, now); got != "<unknown>" {
		t.Errorf("zero time: %q", got)
	}
}

func names(t *metav1.Table, wide bool) []string {
	var out []string
	for _, c := range t.ColumnDefinitions {
		if c.Priority == 0 || wide {
			out = append(out, c.Name)
		}
	}
	return out
}

func TestColumns(t *testing.T) {
	cases := map[string][]string{
		"pods":                   {"Name", "Ready", "Status", "Restarts", "Age"},
		"deployments":            {"Name", "Ready", "Up-to-date", "Available", "Age"},
		"services":               {"Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age"},
		"nodes":                  {"Name", "Status", "Roles", "Age", "Version"},
		"replicasets":            {"Name", "Desired", "Current", "Ready", "Age"},
		"daemonsets":             {"Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age"},
		"namespaces":             {"Name", "Status", "Age"},
		"events":                 {"Last Seen", "Type", "Reason", "Object", "Message"},
		"endpointslices":         {"Name", "AddressType", "Ports", "Endpoints", "Age"},
		"leases":                 {"Name", "Holder", "Age"},
		"configmaps":             {"Name", "Data", "Age"},
		"secrets":                {"Name", "Type", "Data", "Age"},
		"serviceaccounts":        {"Name", "Secrets", "Age"},
		"persistentvolumes":      {"Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim", "StorageClass", "VolumeAttributesClass", "Reason", "Age"},
		"persistentvolumeclaims": {"Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass", "VolumeAttributesClass", "Age"},
		"storageclasses":         {"Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age"},
		"networkpolicies":        {"Name", "Pod-Selector", "Age"},
		"widgets":                {"Name", "Age"},
	}
	for res, want := range cases {
		if got := names(printers.Table(res, nil, now), false); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v; want %v", res, got, want)
		}
	}
	if got := names(printers.Table("pods", nil, now), true); !reflect.DeepEqual(got[5:7], []string{"IP", "Node"}) {
		t.Errorf("pods wide: %v", got)
	}
}

func row(t *testing.T, res string, obj runtime.Object) []any {
	t.Helper()
	tab := printers.Table(res, []runtime.Object{obj}, now)
	if len(tab.Rows) != 1 || len(tab.Rows[0].Cells) != len(tab.ColumnDefinitions) {
		t.Fatalf("%s: %d rows, cells %v for %d columns", res, len(tab.Rows), tab.Rows, len(tab.ColumnDefinitions))
	}
	if tab.Rows[0].Object.Object != obj {
		t.Errorf("%s: row does not carry the object", res)
	}
	return tab.Rows[0].Cells
}

func TestPodRows(t *testing.T) {
	running := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: ago(90 * time.Second)},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.5", ContainerStatuses: []corev1.ContainerStatus{
			{Name: "a", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			{Name: "b", RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: ago(time.Minute)}}},
		}},
	}
	want := []any{"web", "1/2", "Running", "2 (60s ago)", "90s", "10.244.1.5", "n1", "<none>", "<none>"}
	if got := row(t, "pods", running); !reflect.DeepEqual(got, want) {
		t.Errorf("running: %v; want %v", got, want)
	}
	statuses := []struct {
		name string
		pod  corev1.Pod
		want string
	}{
		{"pending", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, "Pending"},
		{"image pull", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
			{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}}}}, "ErrImagePull"},
		{"crash loop", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}}}, "CrashLoopBackOff"},
		{"completed", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{
			{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}}}, "Completed"},
		{"exit code", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
			{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}}}}}}, "ExitCode:3"},
		{"signal", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
			{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Signal: 9, ExitCode: 137}}}}}}, "Signal:9"},
		{"init running", corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i1"}, {Name: "i2"}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "i1", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}},
				{Name: "i2", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}, "Init:1/2"},
		{"init failed", corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i1"}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "i1", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}}}, "Init:Error"},
		{"terminating", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr(ago(0))}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}, "Terminating"},
		{"evicted", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}}, "Evicted"},
	}
	for _, c := range statuses {
		if got := printers.PodStatus(&c.pod); got != c.want {
			t.Errorf("%s: %q; want %q", c.name, got, c.want)
		}
	}
}

func TestOtherRows(t *testing.T) {
	created := ago(4 * time.Hour)
	om := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, CreationTimestamp: created} }
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}, {Name: "log", Image: "fluent"}}}}
	cases := []struct {
		res  string
		obj  runtime.Object
		want []any
	}{
		{"deployments", &appsv1.Deployment{ObjectMeta: om("web"), Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(3)), Selector: sel, Template: tmpl},
			Status: appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2}},
			[]any{"web", "2/3", int64(3), int64(2), "4h", "web,log", "nginx,fluent", "app=web"}},
		{"replicasets", &appsv1.ReplicaSet{ObjectMeta: om("web-1"), Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(2)), Selector: sel, Template: tmpl},
			Status: appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 1}},
			[]any{"web-1", int64(2), int64(2), int64(1), "4h", "web,log", "nginx,fluent", "app=web"}},
		{"services", &corev1.Service{ObjectMeta: om("web"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.10",
			Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: "TCP"}, {Port: 53, Protocol: "UDP"}}}},
			[]any{"web", "NodePort", "10.96.0.10", "<none>", "80:30080/TCP,53/UDP", "4h", "app=web"}},
		{"services", &corev1.Service{ObjectMeta: om("lb"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.11"}},
			[]any{"lb", "LoadBalancer", "10.96.0.11", "<pending>", "<none>", "4h", "<none>"}},
		{"services", &corev1.Service{ObjectMeta: om("ext"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}},
			[]any{"ext", "ExternalName", "<none>", "db.example.com", "<none>", "4h", "<none>"}},
		{"nodes", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: created, Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
			Spec: corev1.NodeSpec{Unschedulable: true},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.10"}},
				NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.37.2-skiff", OSImage: "Debian", KernelVersion: "6.18", ContainerRuntimeVersion: "containerd://2.4.2"}}},
			[]any{"n1", "Ready,SchedulingDisabled", "control-plane", "4h", "v1.37.2-skiff", "192.168.1.10", "<none>", "Debian", "6.18", "containerd://2.4.2"}},
		{"namespaces", &corev1.Namespace{ObjectMeta: om("shop"), Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}, []any{"shop", "Active", "4h"}},
		{"events", &corev1.Event{ObjectMeta: om("web.1"), Type: "Warning", Reason: "BackOff", Message: "Back-off restarting ",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", FieldPath: "spec.containers{web}"}, Source: corev1.EventSource{Component: "kubelet", Host: "n1"},
			Count: 5, FirstTimestamp: ago(10 * time.Minute), LastTimestamp: ago(30 * time.Second)},
			[]any{"30s (x5 over 10m)", "Warning", "BackOff", "pod/web", "spec.containers{web}", "kubelet, n1", "Back-off restarting", "10m", int64(5), "web.1"}},
		{"endpointslices", &discoveryv1.EndpointSlice{ObjectMeta: om("web-x"), AddressType: "IPv4", Ports: []discoveryv1.EndpointPort{{Port: ptr(int32(80))}, {}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1", "10.0.0.2"}}, {Addresses: []string{"10.0.0.3"}}, {Addresses: []string{"10.0.0.4"}}}},
			[]any{"web-x", "IPv4", "80,<unset>", "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...", "4h"}},
		{"endpointslices", &discoveryv1.EndpointSlice{ObjectMeta: om("empty"), AddressType: "IPv4"}, []any{"empty", "IPv4", "<unset>", "<unset>", "4h"}},
		{"leases", &coordinationv1.Lease{ObjectMeta: om("sched"), Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("server-1")}}, []any{"sched", "server-1", "4h"}},
		{"configmaps", &corev1.ConfigMap{ObjectMeta: om("cm"), Data: map[string]string{"a": "", "b": ""}, BinaryData: map[string][]byte{"c": nil}}, []any{"cm", int64(3), "4h"}},
		{"secrets", &corev1.Secret{ObjectMeta: om("s"), Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"a": nil}}, []any{"s", "Opaque", int64(1), "4h"}},
		{"serviceaccounts", &corev1.ServiceAccount{ObjectMeta: om("default"), Secrets: []corev1.ObjectReference{{Name: "t"}}}, []any{"default", int64(1), "4h"}},
		{"persistentvolumes", &corev1.PersistentVolume{ObjectMeta: om("pv1"), Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadWriteOnce}, PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			ClaimRef: &corev1.ObjectReference{Namespace: "default", Name: "data"}, StorageClassName: "local-path", VolumeMode: ptr(corev1.PersistentVolumeFilesystem)},
			Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}},
			[]any{"pv1", "1Gi", "RWO,RWOP", "Delete", "Bound", "default/data", "local-path", "<unset>", "", "4h", "Filesystem"}},
		{"persistentvolumeclaims", &corev1.PersistentVolumeClaim{ObjectMeta: om("pending"), Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr("local-path")},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}},
			[]any{"pending", "Pending", "", "", "", "local-path", "<unset>", "4h", "<unset>"}},
		{"persistentvolumeclaims", &corev1.PersistentVolumeClaim{ObjectMeta: om("data"), Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv1"},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}},
			[]any{"data", "Bound", "pv1", "2Gi", "RWO", "", "<unset>", "4h", "<unset>"}},
		{"storageclasses", &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-path", CreationTimestamp: om("x").CreationTimestamp,
			Annotations: map[string]string{defaults.DefaultClassAnnotation: "true"}}, Provisioner: "skiff.io/local-path",
			VolumeBindingMode: ptr(storagev1.VolumeBindingWaitForFirstConsumer)},
			[]any{"local-path (default)", "skiff.io/local-path", "Delete", "WaitForFirstConsumer", false, "4h"}},
		{"networkpolicies", &networkingv1.NetworkPolicy{ObjectMeta: om("deny"), Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}, []any{"deny", "app=web", "4h"}},
		{"networkpolicies", &networkingv1.NetworkPolicy{ObjectMeta: om("all")}, []any{"all", "<none>", "4h"}},
		{"widgets", &corev1.ConfigMap{ObjectMeta: om("w")}, []any{"w", "4h"}},
		// An object of the wrong type for the resource falls back to NAME AGE, padded.
		{"namespaces", &corev1.ConfigMap{ObjectMeta: om("odd")}, []any{"odd", "4h", ""}},
	}
	for _, c := range cases {
		if got := row(t, c.res, c.obj); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %#v\nwant %#v", c.res, got, c.want)
		}
	}
}
