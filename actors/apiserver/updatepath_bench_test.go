package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/apiwire"
	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/bus/statelog"
)

// The update path as the simulated nodes drive it (over the wire, as NATS requests arrive),
// against an in-memory log so the numbers are the apiserver's own work, not the disk's. Each
// reports the process's CPU time per write (cpu-us/op), which a loaded machine inflates less
// than wall time.

func benchServer(b *testing.B) *Server {
	b.Helper()
	s, _ := benchServerConn(b)
	return s
}

// benchServerConn is benchServer and its connection to the embedded NATS server.
func benchServerConn(b *testing.B) (*Server, *nats.Conn) {
	b.Helper()
	ns, err := natsserver.Start(natsserver.Config{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ns.Shutdown)
	nc, err := ns.Connect()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := statelog.Open(ctx, nc, statelog.Config{Memory: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	s, err := New(Options{Log: l})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.EnsureDefaultNamespaces(ctx); err != nil {
		b.Fatal(err)
	}
	return s, nc
}

// wire sends one request as a node agent does and decodes a 2xx answer into out.
func wire(b *testing.B, s *Server, method, path string, body, out any) {
	b.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		b.Fatal(err)
	}
	raw := s.ServeWire(context.Background(), apiwire.Request{Method: method, Path: path, ContentType: "application/json",
		Body: data, Header: map[string]string{"User-Agent": "skiff-node/v0"}})
	var resp apiwire.Response
	if err := json.Unmarshal(raw, &resp); err != nil {
		b.Fatal(err)
	}
	if resp.Code/100 != 2 {
		b.Fatalf("%s %s: %d %s", method, path, resp.Code, resp.Body)
	}
	if out != nil {
		if err := json.Unmarshal(resp.Body, out); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime is this process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, before time.Duration) {
	b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-us/op")
}

// A node's Lease renewal: PUT of the Lease last answered, renewTime moved.
func BenchmarkUpdatePathLeaseRenewal(b *testing.B) {
	s := benchServer(b)
	now := metav1.NewMicroTime(time.Now())
	var l coordv1.Lease
	wire(b, s, http.MethodPost, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "kube-node-lease"},
		Spec:       coordv1.LeaseSpec{HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To(int32(40)), AcquireTime: &now, RenewTime: &now},
	}, &l)
	b.ResetTimer()
	before := cpuTime()
	for i := 0; i < b.N; i++ {
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now.Add(time.Duration(i+1) * time.Millisecond)))
		wire(b, s, http.MethodPut, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", &l, &l)
	}
	reportCPU(b, before)
}

// A simulated kubelet's one status write per pod: the bound pod as its cache holds it (no
// managedFields), reported Running.
func BenchmarkUpdatePathPodStatus(b *testing.B) {
	s := benchServer(b)
	pods := make([]corev1.Pod, b.N)
	for i := range pods {
		p := &pods[i]
		wire(b, s, http.MethodPost, "/api/v1/namespaces/default/pods?fieldManager=kube-controller-manager", &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "web", "pod-template-hash": "abc"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "u1", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "skiff.local/httpecho:v1",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
		}, p)
		wire(b, s, http.MethodPost, fmt.Sprintf("/api/v1/namespaces/default/pods/%s/binding?fieldManager=skiff-scheduler", p.Name),
			&corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}, nil)
		wire(b, s, http.MethodGet, "/api/v1/namespaces/default/pods/"+p.Name, nil, p)
		p.ManagedFields = nil
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP, p.Status.HostIP = "10.128.0.5", "10.250.0.1"
		p.Status.PodIPs, p.Status.HostIPs = []corev1.PodIP{{IP: "10.128.0.5"}}, []corev1.HostIP{{IP: "10.250.0.1"}}
		p.Status.StartTime = &now
		for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Image: "skiff.local/httpecho:v1", ImageID: "simulated://x",
			ContainerID: "simulated://" + string(p.UID), Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
	}
	bodies := make([]json.RawMessage, len(pods))
	for i := range pods {
		bodies[i], _ = json.Marshal(&pods[i])
	}
	b.ResetTimer()
	before := cpuTime()
	for i := range pods {
		wire(b, s, http.MethodPut, "/api/v1/namespaces/default/pods/"+pods[i].Name+"/status", bodies[i], nil)
	}
	reportCPU(b, before)
}

// A ReplicaSet controller's pod create, as the simulated cluster's replicas arrive.
func BenchmarkCreatePathPod(b *testing.B) {
	s := benchServer(b)
	bodies := make([]json.RawMessage, b.N)
	for i := range bodies {
		bodies[i], _ = json.Marshal(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "web", "pod-template-hash": "abc"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "u1", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "skiff.local/httpecho:v1",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
		})
	}
	b.ResetTimer()
	before := cpuTime()
	for i := range bodies {
		wire(b, s, http.MethodPost, "/api/v1/namespaces/default/pods?fieldManager=kube-controller-manager", bodies[i], nil)
	}
	reportCPU(b, before)
}
